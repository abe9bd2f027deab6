//! The HID source's keys of a `kind = "hid"` `[[scanner]]` entry: which
//! device, and `mode`'s own keys ([`ModeConfig`]: HID POS or keyboard wedge).
//!
//! The keys every scanner has are [`crate::config::Scanner`]'s. Every key
//! is documented in `config/scangate.toml`.

use super::layout::Layout;
use crate::invalid::Invalid;
use serde::Deserialize;
use std::collections::HashSet;
use std::path::PathBuf;

/// Pause that ends or tears a HID scan when `frame_timeout_ms` is unset.
pub const DEFAULT_HID_TIMEOUT_MS: u64 = 500;

/// Longest accepted `gs_substitute`, in bytes.
const MAX_GS_SUBSTITUTE_BYTES: usize = 16;

/// A `kind = "hid"` scanner: USB HID, read through hidraw.
///
/// `mode` is not read by serde here: the config assembler reads it first
/// and gives `mode`'s keys to [`PosConfig`] or [`KeyboardConfig`], so every
/// key keeps its place in the text for error messages.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HidConfig {
    /// A hidraw node or its udev symlink; empty: the device is found by
    /// the match keys below.
    #[serde(default)]
    pub path: PathBuf,
    /// Match: USB vendor id.
    #[serde(default)]
    pub vendor_id: Option<u16>,
    /// Match: USB product id.
    #[serde(default)]
    pub product_id: Option<u16>,
    /// Match: USB serial number string.
    #[serde(default)]
    pub serial_number: Option<String>,
    /// Match: USB port path (`1-1.3`), for identical scanners without
    /// serial numbers.
    #[serde(default)]
    pub usb_port: Option<String>,
    /// A scan whose next report or key does not come within this many ms is
    /// torn (keyboard without a terminator: the pause ends it). Default 500.
    #[serde(default)]
    pub frame_timeout_ms: Option<u64>,
    /// `mode` and its keys.
    #[serde(skip)]
    pub mode: ModeConfig,
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

/// `mode` with the keys only that mode reads.
#[derive(Debug, Clone)]
pub enum ModeConfig {
    /// `mode = "pos"`.
    Pos(PosConfig),
    /// `mode = "keyboard"`.
    Keyboard(KeyboardConfig),
}

impl Default for ModeConfig {
    fn default() -> Self {
        ModeConfig::Pos(PosConfig::default())
    }
}

/// The keys of `mode = "pos"`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PosConfig {
    /// Report id of scanned-data reports. Default 2.
    #[serde(default)]
    pub report_id: Option<u8>,
}

/// The keys of `mode = "keyboard"`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyboardConfig {
    /// Layout the scanner types in. Default `us`.
    #[serde(default)]
    pub layout: Option<Layout>,
    /// How the scanner types GS. Default `auto`.
    #[serde(default)]
    pub gs: Option<GsKey>,
    /// The string typed instead of GS (`gs = "substitute"`).
    #[serde(default)]
    pub gs_substitute: Option<String>,
    /// Keys that end a scan. Default `["enter"]`.
    #[serde(default)]
    pub terminator: Option<Vec<TerminatorKey>>,
    /// Grab the scanner's evdev nodes so it types nowhere else. Default true.
    #[serde(default)]
    pub grab: Option<bool>,
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

impl HidConfig {
    /// A scanner in `mode` with every optional key at its default and no
    /// match keys (set `vendor_id` etc. or `path`).
    pub fn new(mode: HidMode) -> HidConfig {
        HidConfig {
            path: PathBuf::new(),
            vendor_id: None,
            product_id: None,
            serial_number: None,
            usb_port: None,
            frame_timeout_ms: None,
            mode: match mode {
                HidMode::Pos => ModeConfig::Pos(PosConfig::default()),
                HidMode::Keyboard => ModeConfig::Keyboard(KeyboardConfig::default()),
            },
        }
    }

    /// Which mode.
    pub fn mode(&self) -> HidMode {
        match self.mode {
            ModeConfig::Pos(_) => HidMode::Pos,
            ModeConfig::Keyboard(_) => HidMode::Keyboard,
        }
    }

    /// The keyboard keys, for `mode = "keyboard"`.
    pub fn keyboard(&self) -> Option<&KeyboardConfig> {
        match &self.mode {
            ModeConfig::Keyboard(k) => Some(k),
            ModeConfig::Pos(_) => None,
        }
    }

    /// The HID POS keys, for `mode = "pos"`.
    pub fn pos(&self) -> Option<&PosConfig> {
        match &self.mode {
            ModeConfig::Pos(p) => Some(p),
            ModeConfig::Keyboard(_) => None,
        }
    }

    /// The pause (ms) that ends a keyboard scan without a terminator key,
    /// or after which an unfinished scan is rejected as torn.
    pub fn timeout_ms(&self) -> u64 {
        self.frame_timeout_ms.unwrap_or(DEFAULT_HID_TIMEOUT_MS)
    }

    /// Something to find the device by; `mode`'s keys; the timeout.
    pub fn validate(&self) -> Result<(), Invalid> {
        let matchable = !self.path.as_os_str().is_empty()
            || self.vendor_id.is_some()
            || self.product_id.is_some()
            || self.serial_number.is_some()
            || self.usb_port.is_some();
        if !matchable {
            return Err(Invalid::new(
                "vendor_id",
                "nothing says which HID device this scanner is",
                "set vendor_id and product_id (and serial_number or usb_port for identical scanners), or path; `scangate devices` prints a ready entry",
            ));
        }
        if let Some(k) = self.keyboard() {
            k.validate_gs()?;
        }
        if let Some(ms) = self.frame_timeout_ms
            && !(1..=60_000).contains(&ms)
        {
            return Err(Invalid::new(
                "frame_timeout_ms",
                format!("{ms} is out of range"),
                "use 1..=60000 milliseconds (HID default 500), or remove the key",
            ));
        }
        if let Some(k) = self.keyboard() {
            k.validate_terminator()?;
        }
        Ok(())
    }
}

impl KeyboardConfig {
    /// `gs` and `gs_substitute` go together.
    fn validate_gs(&self) -> Result<(), Invalid> {
        match (self.gs, &self.gs_substitute) {
            (Some(GsKey::Substitute), None) => Err(Invalid::new(
                "gs_substitute",
                "gs = \"substitute\" needs the string the scanner types instead of GS",
                "set gs_substitute to the scanner's FNC1 substitution, e.g. gs_substitute = \"~\"",
            )),
            (Some(GsKey::Substitute), Some(sub))
                if sub.is_empty() || sub.len() > MAX_GS_SUBSTITUTE_BYTES || !sub.is_ascii() =>
            {
                Err(Invalid::new(
                    "gs_substitute",
                    format!("a substitute of {} bytes is not usable", sub.len()),
                    "use 1..=16 ASCII characters that never occur in the scanned data",
                ))
            }
            (Some(GsKey::Substitute), Some(_)) => Ok(()),
            (_, Some(_)) => Err(Invalid::new(
                "gs_substitute",
                "gs_substitute is only read with gs = \"substitute\"",
                "set gs = \"substitute\", or remove gs_substitute",
            )),
            _ => Ok(()),
        }
    }

    /// No terminator key twice.
    fn validate_terminator(&self) -> Result<(), Invalid> {
        if let Some(t) = &self.terminator {
            let mut seen = HashSet::new();
            if t.iter().any(|k| !seen.insert(*k)) {
                return Err(Invalid::new(
                    "terminator",
                    "a key is listed twice",
                    "list each key once, e.g. [\"enter\"] or [\"enter\", \"tab\"]",
                ));
            }
        }
        Ok(())
    }
}
