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
    /// `[outbox]`: how long scans' raw bytes are kept.
    #[serde(default)]
    pub outbox: OutboxConfig,
    /// `[[scanner]]`: the scanners this gateway reads.
    #[serde(default, rename = "scanner")]
    pub scanners: Vec<ScannerConfig>,
    /// `[redis]`: the facility store; absent = embedded (the default).
    #[serde(default)]
    pub redis: Option<crate::facility::config::RedisConfig>,
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
}

impl Default for OutboxConfig {
    fn default() -> Self {
        OutboxConfig {
            keep_raw_hours: default_retention_hours(),
        }
    }
}

/// How a scanner is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScannerKind {
    /// RS-232 or USB CDC-ACM (`/dev/ttyUSB*`, `/dev/ttyACM*`, `/dev/scangate/<name>`).
    Serial,
    /// USB HID: HID POS (usage page 0x8C) or keyboard wedge, read through
    /// hidraw; see `mode`.
    Hid,
}

/// How a HID scanner sends its data (`mode = "pos" | "keyboard"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HidMode {
    /// HID POS (usage page 0x8C): byte counts, AIM id, GS as a byte. Preferred.
    Pos,
    /// Keyboard wedge: boot keyboard reports typed in a layout.
    Keyboard,
}

impl HidMode {
    /// The config name.
    pub fn as_str(self) -> &'static str {
        match self {
            HidMode::Pos => "pos",
            HidMode::Keyboard => "keyboard",
        }
    }
}

/// How a keyboard-wedge scanner types GS (`gs = …`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum GsKey {
    /// Ctrl+] or F8 (default).
    #[serde(rename = "auto")]
    Auto,
    /// Ctrl+] only.
    #[serde(rename = "ctrl-]")]
    CtrlBracket,
    /// F8 only.
    #[serde(rename = "f8")]
    F8,
    /// The string in `gs_substitute`.
    #[serde(rename = "substitute")]
    Substitute,
    /// The scanner sends no GS.
    #[serde(rename = "none")]
    None,
}

/// A key that ends a keyboard-wedge scan (`terminator = ["enter"]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TerminatorKey {
    /// Enter (main or keypad).
    Enter,
    /// Tab.
    Tab,
}

/// Pause that ends or tears a HID scan when `frame_timeout_ms` is unset.
pub const DEFAULT_HID_TIMEOUT_MS: u64 = 500;

/// One `[[scanner]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScannerConfig {
    /// Stable scanner name (letters, digits, `-`, `_`); part of the content key.
    pub name: String,
    /// How the scanner is attached.
    pub kind: ScannerKind,
    /// Device path, ideally the udev symlink `/dev/scangate/<name>`.
    /// Required for serial; for HID optional (a hidraw node or its udev
    /// symlink), else the device is found by the match keys below.
    #[serde(default)]
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
    /// Bytes every frame starts with (stripped); a frame without them is
    /// rejected with a reason. Default: none.
    #[serde(default)]
    pub prefix: Option<ByteString>,
    /// Bytes that end a frame. Unset: CR, LF or CRLF. `""`: no terminator
    /// (frames end after `frame_timeout_ms` of silence).
    #[serde(default)]
    pub suffix: Option<ByteString>,
    /// Frames are wrapped in STX (0x02) … ETX (0x03). Default false.
    #[serde(default)]
    pub stx_etx: bool,
    /// Inter-byte timeout in milliseconds: ends a frame for a scanner without
    /// a terminator; with a terminator, an unfinished frame silent this long
    /// is rejected as torn. Default: off (required when there is no terminator).
    #[serde(default)]
    pub frame_timeout_ms: Option<u64>,
    /// Data bits per character, 5..=8. Default 8.
    #[serde(default = "default_data_bits")]
    pub data_bits: u8,
    /// Parity bit. Default none.
    #[serde(default)]
    pub parity: Parity,
    /// Stop bits, 1 or 2. Default 1.
    #[serde(default = "default_stop_bits")]
    pub stop_bits: u8,
    /// Flow control. Default none.
    #[serde(default)]
    pub flow_control: FlowControl,
    /// HID: `pos` or `keyboard`. Required for `kind = "hid"`.
    #[serde(default)]
    pub mode: Option<HidMode>,
    /// HID match: USB vendor id.
    #[serde(default)]
    pub vendor_id: Option<u16>,
    /// HID match: USB product id.
    #[serde(default)]
    pub product_id: Option<u16>,
    /// HID match: USB serial number string.
    #[serde(default)]
    pub serial_number: Option<String>,
    /// HID match: USB port path (`1-1.3`), for identical scanners without
    /// serial numbers.
    #[serde(default)]
    pub usb_port: Option<String>,
    /// HID keyboard: layout the scanner types in. Default `us`.
    #[serde(default)]
    pub layout: Option<crate::source::hid::layout::Layout>,
    /// HID keyboard: how the scanner types GS. Default `auto`.
    #[serde(default)]
    pub gs: Option<GsKey>,
    /// HID keyboard: the string typed instead of GS (`gs = "substitute"`).
    #[serde(default)]
    pub gs_substitute: Option<String>,
    /// HID keyboard: keys that end a scan. Default `["enter"]`.
    #[serde(default)]
    pub terminator: Option<Vec<TerminatorKey>>,
    /// HID keyboard: grab the scanner's evdev nodes so it types nowhere
    /// else. Default true.
    #[serde(default)]
    pub grab: Option<bool>,
    /// HID POS: report id of scanned-data reports. Default 2.
    #[serde(default)]
    pub report_id: Option<u8>,
}

impl ScannerConfig {
    /// A serial scanner with every optional key at its default (8N1, 9600
    /// baud, CR/LF/CRLF framing, no ACK, one unit per read).
    pub fn serial(name: &str, path: impl Into<PathBuf>, scan_type: ScanType) -> ScannerConfig {
        ScannerConfig {
            name: name.into(),
            kind: ScannerKind::Serial,
            path: path.into(),
            baud: default_baud(),
            scan_type,
            quantity: default_quantity(),
            ack: false,
            max_frame_bytes: default_max_frame_bytes(),
            prefix: None,
            suffix: None,
            stx_etx: false,
            frame_timeout_ms: None,
            data_bits: default_data_bits(),
            parity: Parity::None,
            stop_bits: default_stop_bits(),
            flow_control: FlowControl::None,
            mode: None,
            vendor_id: None,
            product_id: None,
            serial_number: None,
            usb_port: None,
            layout: None,
            gs: None,
            gs_substitute: None,
            terminator: None,
            grab: None,
            report_id: None,
        }
    }

    /// A HID scanner in `mode` with every optional key at its default and
    /// no match keys (set `vendor_id` etc. or `path`).
    pub fn hid(name: &str, mode: HidMode, scan_type: ScanType) -> ScannerConfig {
        ScannerConfig {
            kind: ScannerKind::Hid,
            mode: Some(mode),
            ..ScannerConfig::serial(name, "", scan_type)
        }
    }

    /// HID: the pause (ms) that ends a keyboard scan without a terminator
    /// key, or after which an unfinished scan is rejected as torn.
    pub fn hid_timeout_ms(&self) -> u64 {
        self.frame_timeout_ms.unwrap_or(DEFAULT_HID_TIMEOUT_MS)
    }
}

/// Serial parity (`parity = "none" | "odd" | "even"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Parity {
    /// No parity bit (default).
    #[default]
    None,
    /// Odd parity.
    Odd,
    /// Even parity.
    Even,
}

/// Serial flow control (`flow_control = "none" | "software" | "hardware"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlowControl {
    /// None (default).
    #[default]
    None,
    /// XON/XOFF (DC1 0x11 / DC3 0x13).
    Software,
    /// RTS/CTS.
    Hardware,
}

/// A byte string in the config file (`prefix`, `suffix`).
///
/// Written either as a TOML string of ASCII characters, with TOML escapes
/// for control bytes (`"\r\n"`, `"\u0002"`), or as an array of byte values
/// (`[0x0d, 0x0a]`) for anything outside ASCII.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ByteString(pub Vec<u8>);

impl ByteString {
    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl<'de> Deserialize<'de> for ByteString {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = ByteString;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "an ASCII string such as \"\\r\\n\" or an array of byte values such as [0x0d, 0x0a]",
                )
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<ByteString, E> {
                if !s.is_ascii() {
                    return Err(E::custom(
                        "only ASCII characters are allowed in a byte string; write other bytes as an array of byte values, e.g. [0x0d, 0x0a]",
                    ));
                }
                Ok(ByteString(s.as_bytes().to_vec()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<ByteString, A::Error> {
                let mut out = Vec::new();
                while let Some(b) = seq.next_element::<i64>()? {
                    let b = u8::try_from(b).map_err(|_| {
                        serde::de::Error::custom(format!("{b} is not a byte value (0..=255)"))
                    })?;
                    out.push(b);
                }
                Ok(ByteString(out))
            }
        }
        d.deserialize_any(V)
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
fn default_baud() -> u32 {
    9600
}
fn default_quantity() -> u32 {
    1
}
fn default_max_frame_bytes() -> usize {
    4096
}
fn default_data_bits() -> u8 {
    8
}
fn default_stop_bits() -> u8 {
    1
}
/// Longest accepted `prefix` / `suffix`, in bytes.
pub const MAX_AFFIX_BYTES: usize = 16;

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
        if self.outbox.keep_raw_hours == 0 || self.outbox.keep_raw_hours > 24 * 366 {
            return Err(err(
                "outbox.keep_raw_hours".into(),
                format!("{} is out of range", self.outbox.keep_raw_hours),
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
        if let Some(redis) = &self.redis {
            redis.validate(file)?;
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
            if s.kind == ScannerKind::Hid {
                s.validate_hid(&|field: &str, problem: String, fix: &str| {
                    err(key(field), problem, fix)
                })?;
            } else if let Some(field) = s.hid_key_set() {
                return Err(err(
                    key(field),
                    format!("`{field}` applies only to HID scanners"),
                    "remove it, or set kind = \"hid\" if this is a USB HID scanner",
                ));
            }
            if s.kind == ScannerKind::Serial && s.path.as_os_str().is_empty() {
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
            if s.kind == ScannerKind::Serial {
                s.validate_serial(&|field: &str, problem: String, fix: &str| {
                    err(key(field), problem, fix)
                })?;
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

impl ScannerConfig {
    /// The first HID-only key that is set (for a serial scanner, an error).
    fn hid_key_set(&self) -> Option<&'static str> {
        [
            ("mode", self.mode.is_some()),
            ("vendor_id", self.vendor_id.is_some()),
            ("product_id", self.product_id.is_some()),
            ("serial_number", self.serial_number.is_some()),
            ("usb_port", self.usb_port.is_some()),
            ("layout", self.layout.is_some()),
            ("gs", self.gs.is_some()),
            ("gs_substitute", self.gs_substitute.is_some()),
            ("terminator", self.terminator.is_some()),
            ("grab", self.grab.is_some()),
            ("report_id", self.report_id.is_some()),
        ]
        .into_iter()
        .find_map(|(k, set)| set.then_some(k))
    }

    /// HID keys: a mode, something to find the device by, keys of the
    /// other mode or of serial scanners not set.
    fn validate_hid(
        &self,
        err: &dyn Fn(&str, String, &str) -> ConfigError,
    ) -> Result<(), ConfigError> {
        let Some(mode) = self.mode else {
            return Err(err(
                "mode",
                "a HID scanner needs a mode".into(),
                "set mode = \"pos\" (HID POS, preferred) or mode = \"keyboard\" (keyboard wedge); `scangate devices` shows which",
            ));
        };
        for (field, set) in [
            ("ack", self.ack),
            ("prefix", self.prefix.is_some()),
            ("suffix", self.suffix.is_some()),
            ("stx_etx", self.stx_etx),
        ] {
            if set {
                return Err(err(
                    field,
                    format!("`{field}` applies only to serial scanners"),
                    "remove it: HID reports carry their own framing",
                ));
            }
        }
        let matchable = !self.path.as_os_str().is_empty()
            || self.vendor_id.is_some()
            || self.product_id.is_some()
            || self.serial_number.is_some()
            || self.usb_port.is_some();
        if !matchable {
            return Err(err(
                "vendor_id",
                "nothing says which HID device this scanner is".into(),
                "set vendor_id and product_id (and serial_number or usb_port for identical scanners), or path; `scangate devices` prints a ready entry",
            ));
        }
        let other_mode = match mode {
            HidMode::Pos => [
                ("layout", self.layout.is_some()),
                ("gs", self.gs.is_some()),
                ("gs_substitute", self.gs_substitute.is_some()),
                ("terminator", self.terminator.is_some()),
                ("grab", self.grab.is_some()),
            ]
            .into_iter()
            .find_map(|(k, set)| set.then_some(k)),
            HidMode::Keyboard => self.report_id.is_some().then_some("report_id"),
        };
        if let Some(field) = other_mode {
            return Err(err(
                field,
                format!("`{field}` does not apply to mode = \"{}\"", mode.as_str()),
                "remove it, or change `mode`",
            ));
        }
        match (self.gs, &self.gs_substitute) {
            (Some(GsKey::Substitute), None) => {
                return Err(err(
                    "gs_substitute",
                    "gs = \"substitute\" needs the string the scanner types instead of GS".into(),
                    "set gs_substitute to the scanner's FNC1 substitution, e.g. gs_substitute = \"~\"",
                ));
            }
            (Some(GsKey::Substitute), Some(sub))
                if sub.is_empty() || sub.len() > MAX_AFFIX_BYTES || !sub.is_ascii() =>
            {
                return Err(err(
                    "gs_substitute",
                    format!("a substitute of {} bytes is not usable", sub.len()),
                    "use 1..=16 ASCII characters that never occur in the scanned data",
                ));
            }
            (Some(GsKey::Substitute), Some(_)) => {}
            (_, Some(_)) => {
                return Err(err(
                    "gs_substitute",
                    "gs_substitute is only read with gs = \"substitute\"".into(),
                    "set gs = \"substitute\", or remove gs_substitute",
                ));
            }
            _ => {}
        }
        if let Some(ms) = self.frame_timeout_ms
            && !(1..=60_000).contains(&ms)
        {
            return Err(err(
                "frame_timeout_ms",
                format!("{ms} is out of range"),
                "use 1..=60000 milliseconds (HID default 500), or remove the key",
            ));
        }
        if let Some(t) = &self.terminator {
            let mut seen = HashSet::new();
            if t.iter().any(|k| !seen.insert(*k)) {
                return Err(err(
                    "terminator",
                    "a key is listed twice".into(),
                    "list each key once, e.g. [\"enter\"] or [\"enter\", \"tab\"]",
                ));
            }
        }
        Ok(())
    }

    /// Serial line settings and framing: ranges and combinations that
    /// cannot work. `err(field, problem, fix)` builds the error.
    fn validate_serial(
        &self,
        err: &dyn Fn(&str, String, &str) -> ConfigError,
    ) -> Result<(), ConfigError> {
        if !(5..=8).contains(&self.data_bits) {
            return Err(err(
                "data_bits",
                format!("{} data bits is not possible", self.data_bits),
                "use 5, 6, 7 or 8 (default 8; most scanners use 8)",
            ));
        }
        if !(1..=2).contains(&self.stop_bits) {
            return Err(err(
                "stop_bits",
                format!("{} stop bits is not possible", self.stop_bits),
                "use 1 or 2 (default 1)",
            ));
        }
        if let Some(ms) = self.frame_timeout_ms
            && !(1..=60_000).contains(&ms)
        {
            return Err(err(
                "frame_timeout_ms",
                format!("{ms} is out of range"),
                "use 1..=60000 milliseconds (e.g. 50), or remove the key",
            ));
        }
        if let Some(p) = &self.prefix
            && (p.0.is_empty() || p.0.len() > MAX_AFFIX_BYTES)
        {
            return Err(err(
                "prefix",
                format!("a prefix of {} bytes is not usable", p.0.len()),
                "use 1..=16 bytes, or remove the key for no prefix",
            ));
        }
        if let Some(sfx) = &self.suffix {
            if sfx.0.len() > MAX_AFFIX_BYTES {
                return Err(err(
                    "suffix",
                    format!("a suffix of {} bytes is too long", sfx.0.len()),
                    "use at most 16 bytes, e.g. \"\\r\" or \"\\r\\n\"",
                ));
            }
            if self.stx_etx {
                return Err(err(
                    "suffix",
                    "stx_etx = true already ends every frame at ETX; a suffix cannot be combined with it".into(),
                    "remove `suffix` (CR/LF sent after ETX are ignored) or set stx_etx = false",
                ));
            }
            if sfx.0.is_empty() && self.frame_timeout_ms.is_none() {
                return Err(err(
                    "frame_timeout_ms",
                    "suffix = \"\" means frames have no terminator, so nothing would ever end a frame".into(),
                    "set frame_timeout_ms (e.g. 50) so that a pause ends the frame, or configure the scanner's suffix",
                ));
            }
        }
        if let Some(p) = &self.prefix {
            let clash = match (&self.suffix, self.stx_etx) {
                (_, true) => p.0.iter().any(|&b| b == 0x02 || b == 0x03),
                (None, false) => p.0.iter().any(|&b| b == b'\r' || b == b'\n'),
                (Some(sfx), false) => {
                    !sfx.0.is_empty() && p.0.windows(sfx.0.len()).any(|w| w == sfx.0.as_slice())
                }
            };
            if clash {
                return Err(err(
                    "prefix",
                    "the prefix contains the frame terminator, so every frame would end inside it"
                        .into(),
                    "remove the terminator bytes (CR/LF, STX/ETX or the suffix) from the prefix",
                ));
            }
        }
        Ok(())
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
        assert_eq!(c.outbox.keep_raw_hours, default_retention_hours());
        assert_eq!(c.scanners.len(), 3);
        let hid = &c.scanners[2];
        assert_eq!((hid.kind, hid.mode), (ScannerKind::Hid, Some(HidMode::Pos)));
        assert_eq!(
            (hid.vendor_id, hid.product_id),
            (Some(0x0c2e), Some(0x0b61))
        );
        assert_eq!(hid.hid_timeout_ms(), DEFAULT_HID_TIMEOUT_MS);
        let rx = &c.scanners[1];
        assert_eq!(rx.scan_type, ScanType::Receive);
        assert_eq!((rx.baud, rx.quantity, rx.ack), (default_baud(), 1, false));
        assert_eq!(rx.max_frame_bytes, default_max_frame_bytes());
        // Every line key the example sets explicitly is at its documented
        // default, and equals what an omitted key gives (scanner[1]).
        let c1 = &c.scanners[0];
        for s in [c1, rx] {
            assert_eq!(s.data_bits, 8);
            assert_eq!(s.parity, Parity::None);
            assert_eq!(s.stop_bits, 1);
            assert_eq!(s.flow_control, FlowControl::None);
            assert!(!s.stx_etx);
            assert_eq!(
                (&s.prefix, &s.suffix, s.frame_timeout_ms),
                (&None, &None, None)
            );
        }
    }

    /// The commented-out examples of the unset-by-default keys are valid.
    #[test]
    fn the_shipped_examples_of_optional_keys_parse() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/scangate.toml");
        let text = std::fs::read_to_string(path).unwrap();
        let mut found = Vec::new();
        for key in ["prefix", "suffix", "frame_timeout_ms"] {
            let line = text
                .lines()
                .find_map(|l| {
                    l.strip_prefix("# ")
                        .filter(|l| l.starts_with(&format!("{key} = ")))
                })
                .unwrap_or_else(|| panic!("config/scangate.toml documents no example for {key}"));
            found.push(line.to_string());
        }
        let c = scanner_with(&found.join("\n")).unwrap();
        let s = &c.scanners[0];
        assert_eq!(s.prefix.as_ref().unwrap().as_bytes(), b"#");
        assert_eq!(s.suffix.as_ref().unwrap().as_bytes(), b"\r\n");
        assert_eq!(s.frame_timeout_ms, Some(50));
    }

    /// The commented-out HID examples are valid (keyboard keys on a
    /// keyboard scanner, POS keys on a POS one).
    #[test]
    fn the_shipped_hid_examples_parse() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/scangate.toml");
        let text = std::fs::read_to_string(path).unwrap();
        let example = |key: &str| {
            text.lines()
                .find_map(|l| {
                    l.strip_prefix("# ")
                        .filter(|l| l.starts_with(&format!("{key} = ")))
                })
                .unwrap_or_else(|| panic!("config/scangate.toml documents no example for {key}"))
                .to_string()
        };
        let kbd: Vec<String> = [
            "layout",
            "gs",
            "gs_substitute",
            "terminator",
            "grab",
            "serial_number",
            "usb_port",
        ]
        .iter()
        .map(|k| example(k))
        .collect();
        let c = hid_with("keyboard", &kbd.join("\n")).unwrap();
        let s = &c.scanners[0];
        assert_eq!(s.layout, Some(crate::source::hid::layout::Layout::German));
        assert_eq!(
            (s.gs, s.gs_substitute.as_deref()),
            (Some(GsKey::Substitute), Some("~"))
        );
        assert_eq!(
            s.terminator.as_deref(),
            Some(&[TerminatorKey::Enter, TerminatorKey::Tab][..])
        );
        let pos: Vec<String> = ["report_id", "path", "frame_timeout_ms"]
            .iter()
            .map(|k| example(k))
            .collect();
        let c = hid_with("pos", &pos.join("\n")).unwrap();
        assert_eq!(c.scanners[0].report_id, Some(2));
    }

    fn hid_with(mode: &str, extra: &str) -> Result<Config, ConfigError> {
        let text = format!(
            "[[scanner]]\nname='h'\nkind='hid'\nmode='{mode}'\nvendor_id=0x0c2e\nscan_type='dispense'\n{extra}\n"
        );
        Config::parse(&text, None)
    }

    #[test]
    fn hid_keys_are_validated_with_a_fix() {
        for (mode, extra, key) in [
            ("pos", "layout = 'de'", "layout"),
            ("pos", "grab = false", "grab"),
            ("keyboard", "report_id = 2", "report_id"),
            ("keyboard", "gs = 'substitute'", "gs_substitute"),
            ("keyboard", "gs_substitute = '~'", "gs_substitute"),
            (
                "keyboard",
                "gs = 'substitute'\ngs_substitute = ''",
                "gs_substitute",
            ),
            ("keyboard", "terminator = ['enter', 'enter']", "terminator"),
            ("keyboard", "terminator = ['space']", "terminator"),
            ("keyboard", "layout = 'fr'", "layout"),
            ("pos", "ack = true", "ack"),
            ("pos", "suffix = '\\r'", "suffix"),
            ("pos", "vendor_id = 70000", "vendor_id"),
            ("pos", "frame_timeout_ms = 0", "frame_timeout_ms"),
        ] {
            let text = format!(
                "[[scanner]]\nname='h'\nkind='hid'\nmode='{mode}'\nproduct_id=1\nscan_type='dispense'\n{extra}\n"
            );
            let e = Config::parse(&text, None).unwrap_err();
            assert_eq!(e.key, format!("scanner[0].{key}"), "{extra}: {e}");
        }
        // No mode; nothing to match by.
        let e = Config::parse(
            "[[scanner]]\nname='h'\nkind='hid'\nvendor_id=1\nscan_type='dispense'\n",
            None,
        )
        .unwrap_err();
        assert_eq!(e.key, "scanner[0].mode", "{e}");
        let e = Config::parse(
            "[[scanner]]\nname='h'\nkind='hid'\nmode='pos'\nscan_type='dispense'\n",
            None,
        )
        .unwrap_err();
        assert_eq!(e.key, "scanner[0].vendor_id", "{e}");
        assert!(e.fix.contains("scangate devices"), "{e}");
        // HID keys on a serial scanner are named.
        let e = scanner_with("usb_port = '1-1'").unwrap_err();
        assert_eq!(e.key, "scanner[0].usb_port", "{e}");
        assert!(e.fix.contains("kind = \"hid\""), "{e}");
        // A HID scanner needs no path; a serial one still does.
        hid_with("keyboard", "terminator = []\nlayout = 'us'\ngs = 'f8'").unwrap();
        let e = Config::parse(
            "[[scanner]]\nname='s'\nkind='serial'\nscan_type='dispense'\n",
            None,
        )
        .unwrap_err();
        assert_eq!(e.key, "scanner[0].path", "{e}");
    }

    fn scanner_with(extra: &str) -> Result<Config, ConfigError> {
        let text = format!(
            "[[scanner]]\nname='a'\nkind='serial'\npath='/dev/x'\nscan_type='dispense'\n{extra}\n"
        );
        Config::parse(&text, None)
    }

    #[test]
    fn byte_strings_as_escaped_strings_or_byte_arrays() {
        let c = scanner_with("suffix = \"\\r\\n\"\nprefix = \"\\u0002]\"").unwrap();
        assert_eq!(c.scanners[0].suffix.as_ref().unwrap().as_bytes(), b"\r\n");
        assert_eq!(c.scanners[0].prefix.as_ref().unwrap().as_bytes(), b"\x02]");
        let c = scanner_with("suffix = [0x0d, 0x0a]\nprefix = [0xff]").unwrap();
        assert_eq!(c.scanners[0].suffix.as_ref().unwrap().as_bytes(), b"\r\n");
        assert_eq!(c.scanners[0].prefix.as_ref().unwrap().as_bytes(), b"\xff");
        let e = scanner_with("suffix = [13, 256]").unwrap_err();
        assert_eq!(e.key, "scanner[0].suffix", "{e}");
        assert!(e.problem.contains("256"), "{e}");
        let e = scanner_with("suffix = \"\u{e9}\"").unwrap_err();
        assert_eq!(e.key, "scanner[0].suffix", "{e}");
        assert!(e.problem.contains("ASCII"), "{e}");
        let e = scanner_with("suffix = 13").unwrap_err();
        assert_eq!(e.key, "scanner[0].suffix", "{e}");
    }

    #[test]
    fn line_settings_parse_and_bad_ones_are_named() {
        let c = scanner_with(
            "data_bits = 7\nparity = \"even\"\nstop_bits = 2\nflow_control = \"hardware\"",
        )
        .unwrap();
        let s = &c.scanners[0];
        assert_eq!(
            (s.data_bits, s.parity, s.stop_bits, s.flow_control),
            (7, Parity::Even, 2, FlowControl::Hardware)
        );
        for (extra, key) in [
            ("data_bits = 9", "data_bits"),
            ("data_bits = 4", "data_bits"),
            ("stop_bits = 3", "stop_bits"),
            ("parity = \"mark\"", "parity"),
            ("flow_control = \"xon\"", "flow_control"),
            ("frame_timeout_ms = 0", "frame_timeout_ms"),
            ("frame_timeout_ms = 60001", "frame_timeout_ms"),
            ("prefix = \"\"", "prefix"),
            ("suffix = \"0123456789abcdefX\"", "suffix"),
            ("stx_etx = 1", "stx_etx"),
        ] {
            let e = scanner_with(extra).unwrap_err();
            assert_eq!(e.key, format!("scanner[0].{key}"), "{extra}: {e}");
        }
    }

    #[test]
    fn framing_combinations_that_cannot_work_are_rejected_with_a_fix() {
        let e = scanner_with("stx_etx = true\nsuffix = \"\\r\"").unwrap_err();
        assert_eq!(e.key, "scanner[0].suffix", "{e}");
        assert!(e.fix.contains("remove `suffix`"), "{e}");
        let e = scanner_with("suffix = \"\"").unwrap_err();
        assert_eq!(e.key, "scanner[0].frame_timeout_ms", "{e}");
        assert!(e.fix.contains("set frame_timeout_ms"), "{e}");
        let e = scanner_with("prefix = \"A\\r\"").unwrap_err();
        assert_eq!(e.key, "scanner[0].prefix", "{e}");
        let e = scanner_with("stx_etx = true\nprefix = \"\\u0002\"").unwrap_err();
        assert_eq!(e.key, "scanner[0].prefix", "{e}");
        let e = scanner_with("suffix = \"#!\"\nprefix = \"x#!\"").unwrap_err();
        assert_eq!(e.key, "scanner[0].prefix", "{e}");
        // Valid combinations.
        for ok in [
            "suffix = \"\"\nframe_timeout_ms = 50",
            "stx_etx = true\nframe_timeout_ms = 200\nprefix = \"]\"",
            "suffix = \"\\r\\n\"\nprefix = \"#\"\nframe_timeout_ms = 500",
            "frame_timeout_ms = 100",
        ] {
            scanner_with(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
    }

    #[test]
    fn no_file_means_defaults() {
        let c = Config::load(None).unwrap();
        assert_eq!(c.dedup.window_ms, 3000);
        assert!(c.scanners.is_empty());
    }

    #[test]
    fn keep_raw_hours_defaults_to_the_retention_and_zero_is_named() {
        let c = Config::parse("[outbox]\n", None).unwrap();
        assert_eq!(c.outbox.keep_raw_hours, 72);
        let e = Config::parse("[outbox]\nkeep_raw_hours = 0\n", None).unwrap_err();
        assert_eq!(e.key, "outbox.keep_raw_hours");
        assert!(e.fix.contains("1..=8784"), "{e}");
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
