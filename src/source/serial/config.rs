//! The serial source's keys of a `kind = "serial"` `[[scanner]]` entry:
//! device, line settings, ACK and framing.
//!
//! The keys every scanner has (`name`, `scan_type`, `quantity`,
//! `max_frame_bytes`) are [`crate::config::Scanner`]'s; `kind` picks this
//! type. Every key is documented in `config/scangate.toml`.

use crate::invalid::Invalid;
use serde::Deserialize;
use std::fmt;
use std::path::PathBuf;

/// Longest accepted `prefix` / `suffix`, in bytes.
pub const MAX_AFFIX_BYTES: usize = 16;

/// A `kind = "serial"` scanner: RS-232 or USB CDC-ACM (`/dev/ttyUSB*`,
/// `/dev/ttyACM*`, `/dev/scangate/<name>`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SerialConfig {
    /// Device path, ideally the udev symlink `/dev/scangate/<name>`. Required
    /// (empty is refused with the fix).
    #[serde(default)]
    pub path: PathBuf,
    /// Serial line speed.
    #[serde(default = "default_baud")]
    pub baud: u32,
    /// Send ACK (0x06) after the scan is durable, NAK (0x15) on a framing error.
    #[serde(default)]
    pub ack: bool,
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
}

impl SerialConfig {
    /// `path` with every optional key at its default (8N1, 9600 baud,
    /// CR/LF/CRLF framing, no ACK).
    pub fn new(path: impl Into<PathBuf>) -> SerialConfig {
        SerialConfig {
            path: path.into(),
            baud: default_baud(),
            ack: false,
            prefix: None,
            suffix: None,
            stx_etx: false,
            frame_timeout_ms: None,
            data_bits: default_data_bits(),
            parity: Parity::None,
            stop_bits: default_stop_bits(),
            flow_control: FlowControl::None,
        }
    }

    /// The device path, line settings and framing: ranges and combinations
    /// that cannot work.
    pub fn validate(&self) -> Result<(), Invalid> {
        if self.path.as_os_str().is_empty() {
            return Err(Invalid::new(
                "path",
                "the device path is empty",
                "set it to the udev symlink, e.g. /dev/scangate/<name>",
            ));
        }
        self.validate_baud()?;
        if !(5..=8).contains(&self.data_bits) {
            return Err(Invalid::new(
                "data_bits",
                format!("{} data bits is not possible", self.data_bits),
                "use 5, 6, 7 or 8 (default 8; most scanners use 8)",
            ));
        }
        if !(1..=2).contains(&self.stop_bits) {
            return Err(Invalid::new(
                "stop_bits",
                format!("{} stop bits is not possible", self.stop_bits),
                "use 1 or 2 (default 1)",
            ));
        }
        if let Some(ms) = self.frame_timeout_ms
            && !(1..=60_000).contains(&ms)
        {
            return Err(Invalid::new(
                "frame_timeout_ms",
                format!("{ms} is out of range"),
                "use 1..=60000 milliseconds (e.g. 50), or remove the key",
            ));
        }
        if let Some(p) = &self.prefix
            && (p.0.is_empty() || p.0.len() > MAX_AFFIX_BYTES)
        {
            return Err(Invalid::new(
                "prefix",
                format!("a prefix of {} bytes is not usable", p.0.len()),
                "use 1..=16 bytes, or remove the key for no prefix",
            ));
        }
        if let Some(sfx) = &self.suffix {
            if sfx.0.len() > MAX_AFFIX_BYTES {
                return Err(Invalid::new(
                    "suffix",
                    format!("a suffix of {} bytes is too long", sfx.0.len()),
                    "use at most 16 bytes, e.g. \"\\r\" or \"\\r\\n\"",
                ));
            }
            if self.stx_etx {
                return Err(Invalid::new(
                    "suffix",
                    "stx_etx = true already ends every frame at ETX; a suffix cannot be combined with it",
                    "remove `suffix` (CR/LF sent after ETX are ignored) or set stx_etx = false",
                ));
            }
            if sfx.0.is_empty() && self.frame_timeout_ms.is_none() {
                return Err(Invalid::new(
                    "frame_timeout_ms",
                    "suffix = \"\" means frames have no terminator, so nothing would ever end a frame",
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
                return Err(Invalid::new(
                    "prefix",
                    "the prefix contains the frame terminator, so every frame would end inside it",
                    "remove the terminator bytes (CR/LF, STX/ETX or the suffix) from the prefix",
                ));
            }
        }
        Ok(())
    }

    /// `baud` alone (also checked where a HID entry carries it, as it
    /// always was).
    pub fn validate_baud(&self) -> Result<(), Invalid> {
        if self.baud == 0 || self.baud > 4_000_000 {
            return Err(Invalid::new(
                "baud",
                format!("{} is not a usable baud rate", self.baud),
                "use the scanner's configured rate, e.g. 9600 or 115200",
            ));
        }
        Ok(())
    }

    /// The first key set that changes how frames are read or answered
    /// (`ack`, `prefix`, `suffix`, `stx_etx`): what a HID scanner, whose
    /// reports carry their own framing, refuses.
    pub fn framing_key_set(&self) -> Option<&'static str> {
        [
            ("ack", self.ack),
            ("prefix", self.prefix.is_some()),
            ("suffix", self.suffix.is_some()),
            ("stx_etx", self.stx_etx),
        ]
        .into_iter()
        .find_map(|(k, set)| set.then_some(k))
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

/// Default `baud`.
pub(crate) fn default_baud() -> u32 {
    9600
}
fn default_data_bits() -> u8 {
    8
}
fn default_stop_bits() -> u8 {
    1
}
