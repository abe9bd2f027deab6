//! Configuration: the TOML file, its defaults and its validation.
//!
//! Parsing and validation never touch hardware, so `scangate check-config`
//! can run on a technician's laptop. Unknown keys are rejected by serde
//! (`deny_unknown_fields`) so a typo never silently falls back to a default.
//! Every field is documented in `config/scangate.toml`, which a test parses.

use serde::Deserialize;
use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

/// What a scanner's reads mean for inventory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, Hash)]
#[serde(rename_all = "lowercase")]
pub enum ScanType {
    /// Goods received into stock.
    Receive,
    /// Dispensed to a patient.
    Dispense,
    /// Destroyed / wasted.
    Waste,
    /// Returned to a supplier or reverse distributor.
    Return,
    /// Inventory adjustment.
    Adjust,
}

impl ScanType {
    /// The lowercase name used in config, the ledger and the content key.
    pub fn as_str(self) -> &'static str {
        match self {
            ScanType::Receive => "receive",
            ScanType::Dispense => "dispense",
            ScanType::Waste => "waste",
            ScanType::Return => "return",
            ScanType::Adjust => "adjust",
        }
    }

    /// Parse the lowercase name.
    pub fn parse(s: &str) -> Option<ScanType> {
        Some(match s {
            "receive" => ScanType::Receive,
            "dispense" => ScanType::Dispense,
            "waste" => ScanType::Waste,
            "return" => ScanType::Return,
            "adjust" => ScanType::Adjust,
            _ => return None,
        })
    }
}

/// The whole configuration file.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `[gateway]`: who this gateway is and where it keeps state.
    #[serde(default)]
    pub gateway: GatewayConfig,
    /// `[dedup]`: the echo window and how long exact knowledge is kept.
    #[serde(default)]
    pub dedup: DedupConfig,
    /// `[[scanner]]`: the scanners this gateway reads.
    #[serde(default, rename = "scanner")]
    pub scanners: Vec<ScannerConfig>,
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

/// How a scanner is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScannerKind {
    /// RS-232 or USB CDC-ACM (`/dev/ttyUSB*`, `/dev/ttyACM*`, `/dev/scangate/<name>`).
    Serial,
}

/// One `[[scanner]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScannerConfig {
    /// Stable scanner name (letters, digits, `-`, `_`); part of the content key.
    pub name: String,
    /// How the scanner is attached.
    pub kind: ScannerKind,
    /// Device path, ideally the udev symlink `/dev/scangate/<name>`.
    pub path: PathBuf,
    /// Serial line speed.
    #[serde(default = "default_baud")]
    pub baud: u32,
    /// What a read from this scanner means.
    pub scan_type: ScanType,
    /// Units per read.
    #[serde(default = "default_quantity")]
    pub quantity: u32,
    /// Send ACK (0x06) after the scan is durable, NAK (0x15) on a framing error.
    #[serde(default)]
    pub ack: bool,
    /// Longest accepted frame in bytes; longer frames are rejected and audited.
    #[serde(default = "default_max_frame_bytes")]
    pub max_frame_bytes: usize,
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
fn default_baud() -> u32 {
    9600
}
fn default_quantity() -> u32 {
    1
}
fn default_max_frame_bytes() -> usize {
    4096
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
            fix: "check the path given with --config and that the service user may read it".into(),
        })?;
        Config::parse(&text, Some(path))
    }

    /// Parse and validate config text (`file` is only used in messages).
    pub fn parse(text: &str, file: Option<&Path>) -> Result<Config, ConfigError> {
        let cfg: Config = toml::from_str(text).map_err(|e| {
            let msg = e.message().to_string();
            let key = match e.span() {
                Some(span) => locate_key(text, span.start),
                None => "(file)".into(),
            };
            ConfigError {
                file: file.map(Path::to_owned),
                key,
                problem: msg,
                fix: "compare with the documented example config/scangate.toml".into(),
            }
        })?;
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
        if self.dedup.window_ms > self.dedup.retention_hours * 3_600_000 {
            return Err(err(
                "dedup.window_ms".into(),
                "the echo window is longer than the retention horizon".into(),
                "make dedup.retention_hours cover dedup.window_ms",
            ));
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
            if s.path.as_os_str().is_empty() {
                return Err(err(
                    key("path"),
                    "the device path is empty".into(),
                    "set it to the udev symlink, e.g. /dev/scangate/<name>",
                ));
            }
            if s.baud == 0 || s.baud > 4_000_000 {
                return Err(err(
                    key("baud"),
                    format!("{} is not a usable baud rate", s.baud),
                    "use the scanner's configured rate, e.g. 9600 or 115200",
                ));
            }
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
mod tests {
    use super::*;

    #[test]
    fn the_shipped_example_parses_and_matches_the_documented_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/scangate.toml");
        let c = Config::load(Some(&path)).unwrap();
        assert_eq!(c.gateway.facility, "pharmacy-0042");
        assert_eq!(c.dedup.window_ms, default_window_ms());
        assert_eq!(c.dedup.retention_hours, default_retention_hours());
        assert_eq!(c.scanners.len(), 2);
        let rx = &c.scanners[1];
        assert_eq!(rx.scan_type, ScanType::Receive);
        assert_eq!((rx.baud, rx.quantity, rx.ack), (default_baud(), 1, false));
        assert_eq!(rx.max_frame_bytes, default_max_frame_bytes());
    }

    #[test]
    fn no_file_means_defaults() {
        let c = Config::load(None).unwrap();
        assert_eq!(c.dedup.window_ms, 3000);
        assert!(c.scanners.is_empty());
    }

    #[test]
    fn unknown_key_is_named() {
        let e = Config::parse("[dedup]\nwindow_msec = 5\n", None).unwrap_err();
        assert_eq!(e.key, "dedup.window_msec");
        assert!(e.problem.contains("window_msec"), "{e}");
    }

    #[test]
    fn bad_value_is_named_with_index() {
        let text = "[[scanner]]\nname='a'\nkind='serial'\npath='/dev/x'\nscan_type='dispense'\n\
                    [[scanner]]\nname='b'\nkind='serial'\npath='/dev/y'\nscan_type='dispense'\nquantity=0\n";
        let e = Config::parse(text, None).unwrap_err();
        assert_eq!(e.key, "scanner[1].quantity");
    }

    #[test]
    fn bad_enum_is_named() {
        let text = "[[scanner]]\nname='a'\nkind='serial'\npath='/dev/x'\nscan_type='sell'\n";
        let e = Config::parse(text, None).unwrap_err();
        assert_eq!(e.key, "scanner[0].scan_type", "{e}");
    }
}
