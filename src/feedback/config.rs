//! The `feedback` table of a `[[scanner]]` entry: which protocol the
//! scanner speaks back, the gateway LED, the delay bound, and for
//! `protocol = "raw"` the bytes of each decision kind.
//!
//! ```toml
//! feedback = { protocol = "zebra-ssi" }
//! feedback = { protocol = "raw", committed = "\u0007", rejected = [0x1b, 0x38] }
//! feedback = { led = "ACT" }                   # keyboard wedges: the gateway's LED
//! feedback = { protocol = "honeywell", led = "ACT", max_delay_ms = 2000 }
//! ```
//!
//! Keys are relative to the table (`protocol`, `led`, …); the config
//! assembler names the section (`scanner[1].feedback.`).

use super::Told;
use crate::invalid::Invalid;
use crate::source::serial::config::ByteString;
use serde::Deserialize;
use std::time::Duration;

/// Default `max_delay_ms`.
pub const DEFAULT_MAX_DELAY_MS: u64 = 2000;
/// Largest accepted `max_delay_ms`.
pub const MAX_MAX_DELAY_MS: u64 = 60_000;
/// Longest accepted raw byte string, in bytes.
pub const MAX_RAW_BYTES: usize = 64;

/// One scanner's feedback settings. Absent table: no feedback.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedbackConfig {
    /// What the scanner itself is told, in its protocol. Unset: nothing is
    /// sent to the scanner (only `led`, if set).
    #[serde(default)]
    pub protocol: Option<Protocol>,
    /// A Linux LED class device of the gateway (`/sys/class/leds/NAME`,
    /// e.g. a Pi's `ACT`, a GPIO LED or buzzer) that shows each decision.
    #[serde(default)]
    pub led: Option<String>,
    /// A signal for a decision that comes later than this many ms after
    /// the read is skipped (and counted): a late beep would be taken for
    /// the next read. Default 2000.
    #[serde(default = "default_max_delay_ms")]
    pub max_delay_ms: u64,
    /// `protocol = "raw"`: bytes sent for a committed read.
    #[serde(default)]
    pub committed: Option<ByteString>,
    /// `protocol = "raw"`: bytes sent for a certain echo.
    #[serde(default)]
    pub echo: Option<ByteString>,
    /// `protocol = "raw"`: bytes sent for an ambiguous echo.
    #[serde(default)]
    pub ambiguous: Option<ByteString>,
    /// `protocol = "raw"`: bytes sent for a rejected read.
    #[serde(default)]
    pub rejected: Option<ByteString>,
    /// `protocol = "raw"`: bytes sent for a read stored while the facility
    /// store is unreachable.
    #[serde(default)]
    pub waiting: Option<ByteString>,
    /// `protocol = "raw"`: bytes sent for a control label read (REPEAT,
    /// QUANTITY N).
    #[serde(default)]
    pub control: Option<ByteString>,
    /// `protocol = "raw"`: bytes sent when a control label read lapses
    /// unused.
    #[serde(default)]
    pub lapsed: Option<ByteString>,
    /// `protocol = "raw"`: bytes sent for a read whose expiry passed
    /// (unset: `committed`'s).
    #[serde(default)]
    pub expired: Option<ByteString>,
    /// `protocol = "raw"`: bytes sent for a read that expires soon (unset:
    /// `committed`'s).
    #[serde(default)]
    pub expiring: Option<ByteString>,
    /// `protocol = "raw"`: bytes sent for a read of a recalled product
    /// (unset: `committed`'s).
    #[serde(default)]
    pub recalled: Option<ByteString>,
    /// `protocol = "raw"`: bytes sent for a read of a product not in the
    /// product data (unset: `committed`'s).
    #[serde(default)]
    pub unknown: Option<ByteString>,
    /// `protocol = "raw"`: bytes sent for a serialised item received a
    /// second time (unset: `committed`'s).
    #[serde(default)]
    pub suspect: Option<ByteString>,
}

/// `protocol = "zebra-ssi" | "honeywell" | "datalogic" | "raw" | "hid-pos"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// Zebra (Symbol/Motorola) Simple Serial Interface: BEEP packets.
    ZebraSsi,
    /// Honeywell (Hand Held Products) Host ACK escape commands.
    Honeywell,
    /// Datalogic (and PSC) single-character RS-232 host commands.
    Datalogic,
    /// Byte strings of your own per decision kind, for any other make.
    Raw,
    /// HID POS output reports, from the device's report descriptor.
    HidPos,
}

impl Protocol {
    /// The config value.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::ZebraSsi => "zebra-ssi",
            Protocol::Honeywell => "honeywell",
            Protocol::Datalogic => "datalogic",
            Protocol::Raw => "raw",
            Protocol::HidPos => "hid-pos",
        }
    }

    /// Whether it is spoken over a serial line (`kind = "serial"`).
    pub fn is_serial(self) -> bool {
        !matches!(self, Protocol::HidPos)
    }
}

/// How the scanner is connected, for [`FeedbackConfig::validate_for`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// RS-232 or USB CDC-ACM.
    Serial,
    /// USB HID POS (`mode = "pos"`).
    HidPos,
    /// USB HID keyboard wedge (`mode = "keyboard"`): no channel back.
    Keyboard,
}

/// A decision that came too late to be signalled: how late it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Late {
    /// Time from the read to the decision.
    pub after: Duration,
    /// The bound it passed (`max_delay_ms`).
    pub bound: Duration,
}

fn default_max_delay_ms() -> u64 {
    DEFAULT_MAX_DELAY_MS
}

impl FeedbackConfig {
    /// Feedback in `protocol`, every other key at its default.
    pub fn speaking(protocol: Protocol) -> FeedbackConfig {
        FeedbackConfig {
            protocol: Some(protocol),
            led: None,
            max_delay_ms: DEFAULT_MAX_DELAY_MS,
            committed: None,
            echo: None,
            ambiguous: None,
            rejected: None,
            waiting: None,
            control: None,
            lapsed: None,
            expired: None,
            expiring: None,
            recalled: None,
            unknown: None,
            suspect: None,
        }
    }

    /// `max_delay_ms` as a duration.
    pub fn max_delay(&self) -> Duration {
        Duration::from_millis(self.max_delay_ms)
    }

    /// Whether a decision made `since_read` after the read is still
    /// signalled; `Err` says how late it was (skip it and count it).
    pub fn due(&self, since_read: Duration) -> Result<(), Late> {
        let bound = self.max_delay();
        if since_read > bound {
            Err(Late {
                after: since_read,
                bound,
            })
        } else {
            Ok(())
        }
    }

    /// The `protocol = "raw"` byte string for `told`, if set.
    pub fn raw(&self, told: Told) -> Option<&ByteString> {
        match told {
            Told::Committed => self.committed.as_ref(),
            Told::Echo => self.echo.as_ref(),
            Told::Ambiguous => self.ambiguous.as_ref(),
            Told::Rejected => self.rejected.as_ref(),
            Told::Waiting => self.waiting.as_ref(),
            Told::Control => self.control.as_ref(),
            Told::Lapsed => self.lapsed.as_ref(),
            Told::Expired => self.expired.as_ref(),
            Told::Expiring => self.expiring.as_ref(),
            Told::Recalled => self.recalled.as_ref(),
            Told::Unknown => self.unknown.as_ref(),
            Told::Suspect => self.suspect.as_ref(),
        }
    }

    /// The table on its own: something to do, raw keys only with `raw`,
    /// lengths, the LED name, the delay bound.
    pub fn validate(&self) -> Result<(), Invalid> {
        if self.protocol.is_none() && self.led.is_none() {
            return Err(Invalid::new(
                "",
                "a feedback table with neither `protocol` nor `led` does nothing",
                "set protocol (\"zebra-ssi\", \"honeywell\", \"datalogic\", \"raw\", \"hid-pos\") or led = \"NAME\" (see `ls /sys/class/leds`), or remove the table",
            ));
        }
        let raw = self.protocol == Some(Protocol::Raw);
        for told in Told::ALL {
            let Some(bytes) = self.raw(told) else {
                continue;
            };
            if !raw {
                return Err(Invalid::new(
                    told.as_str(),
                    "byte strings are only used with protocol = \"raw\"; the built-in protocols send their vendor's bytes",
                    "set protocol = \"raw\" to send your own bytes, or remove the key (the built-in bytes are in docs/scanner-feedback.md)",
                ));
            }
            if bytes.as_bytes().len() > MAX_RAW_BYTES {
                return Err(Invalid::new(
                    told.as_str(),
                    format!("{} bytes is too long for a signal", bytes.as_bytes().len()),
                    format!("use at most {MAX_RAW_BYTES} bytes, or \"\" to send nothing"),
                ));
            }
        }
        if raw && Told::ALL.iter().all(|&t| self.raw(t).is_none()) {
            return Err(Invalid::new(
                "protocol",
                "protocol = \"raw\" without any byte string sends nothing",
                "set the bytes for at least one of committed, echo, ambiguous, rejected, waiting, control, lapsed, expired, expiring, recalled, unknown, suspect (e.g. committed = \"\\u0007\")",
            ));
        }
        // A name in /sys/class/leds, or the absolute path of an LED class
        // device's directory.
        let absolute = |n: &str| n.starts_with('/') && !n.split('/').any(|c| c == "..");
        if let Some(name) = &self.led
            && !absolute(name)
            && (name.is_empty() || name == "." || name == ".." || name.contains('/'))
        {
            return Err(Invalid::new(
                "led",
                format!("{name:?} is not the name of an LED class device"),
                "use the name of a directory in /sys/class/leds (e.g. \"ACT\" or \"led0\" on a Pi; `ls /sys/class/leds` lists them), or the absolute path of an LED class device's directory",
            ));
        }
        if !(1..=MAX_MAX_DELAY_MS).contains(&self.max_delay_ms) {
            return Err(Invalid::new(
                "max_delay_ms",
                format!("{} is out of range", self.max_delay_ms),
                format!("use 1..={MAX_MAX_DELAY_MS} milliseconds (default {DEFAULT_MAX_DELAY_MS})"),
            ));
        }
        Ok(())
    }

    /// [`validate`](Self::validate), and whether the protocol can reach a
    /// scanner connected this way.
    pub fn validate_for(&self, transport: Transport) -> Result<(), Invalid> {
        self.validate()?;
        let Some(protocol) = self.protocol else {
            return Ok(());
        };
        match transport {
            Transport::Keyboard => Err(Invalid::new(
                "protocol",
                "a keyboard wedge has no channel back to the scanner: nothing can be sent to it",
                "remove `protocol` and set led = \"NAME\" to show decisions on the gateway's own LED (`ls /sys/class/leds`)",
            )),
            Transport::HidPos if protocol != Protocol::HidPos => Err(Invalid::new(
                "protocol",
                format!(
                    "\"{}\" is spoken over a serial line, but this scanner is HID POS",
                    protocol.as_str()
                ),
                "use protocol = \"hid-pos\" (the output reports come from the device's report descriptor)",
            )),
            Transport::Serial if !protocol.is_serial() => Err(Invalid::new(
                "protocol",
                "\"hid-pos\" needs a USB HID POS scanner, but this scanner is serial",
                "use the protocol the scanner speaks: \"zebra-ssi\", \"honeywell\", \"datalogic\" or \"raw\"",
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> FeedbackConfig {
        toml::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn refused(text: &str) -> Invalid {
        parse(text).validate().expect_err(text)
    }

    #[test]
    fn the_documented_tables_parse_and_validate() {
        for text in [
            "protocol = \"zebra-ssi\"",
            "protocol = \"honeywell\"",
            "protocol = \"datalogic\"",
            "protocol = \"raw\"\ncommitted = \"\\u0007\"\necho = \"\"\nambiguous = \"...\"\nrejected = \"...\"\nwaiting = \"...\"",
            "protocol = \"hid-pos\"",
            "led = \"ACT\"",
            "protocol = \"zebra-ssi\"\nled = \"ACT\"\nmax_delay_ms = 2000",
        ] {
            parse(text)
                .validate()
                .unwrap_or_else(|e| panic!("{text}: {e}"));
        }
    }

    #[test]
    fn defaults() {
        let cfg = parse("protocol = \"honeywell\"");
        assert_eq!(cfg.max_delay_ms, DEFAULT_MAX_DELAY_MS);
        assert_eq!(cfg.led, None);
        assert_eq!(cfg.raw(Told::Committed), None);
    }

    #[test]
    fn unknown_keys_and_protocols_are_refused_by_the_parser() {
        assert!(toml::from_str::<FeedbackConfig>("protocol = \"zebra\"").is_err());
        assert!(toml::from_str::<FeedbackConfig>("protocol = \"raw\"\ncommited = \"x\"").is_err());
        assert!(toml::from_str::<FeedbackConfig>("protocol = \"raw\"\ncommitted = [256]").is_err());
    }

    #[test]
    fn nothing_to_do_is_refused() {
        let e = refused("max_delay_ms = 100");
        assert_eq!(e.key, "");
        assert!(e.problem.contains("neither"));
    }

    #[test]
    fn raw_bytes_need_protocol_raw() {
        let e = refused("protocol = \"honeywell\"\nrejected = \"x\"");
        assert_eq!(e.key, "rejected");
        assert!(e.fix.contains("protocol = \"raw\""));
        let e = refused("led = \"ACT\"\ncommitted = \"x\"");
        assert_eq!(e.key, "committed");
    }

    #[test]
    fn raw_without_bytes_and_over_long_bytes_are_refused() {
        assert_eq!(refused("protocol = \"raw\"").key, "protocol");
        let long = format!(
            "protocol = \"raw\"\nwaiting = \"{}\"",
            "x".repeat(MAX_RAW_BYTES + 1)
        );
        assert_eq!(refused(&long).key, "waiting");
        // An empty string is "send nothing", which is allowed.
        parse("protocol = \"raw\"\necho = \"\"").validate().unwrap();
    }

    #[test]
    fn led_names_and_delay_bounds() {
        for name in ["", ".", "..", "../../etc", "a/b"] {
            assert_eq!(refused(&format!("led = {name:?}")).key, "led", "{name}");
        }
        assert_eq!(
            refused("led = \"ACT\"\nmax_delay_ms = 0").key,
            "max_delay_ms"
        );
        assert_eq!(
            refused("led = \"ACT\"\nmax_delay_ms = 60001").key,
            "max_delay_ms"
        );
    }

    #[test]
    fn protocol_must_fit_the_transport() {
        let serial = parse("protocol = \"zebra-ssi\"");
        serial.validate_for(Transport::Serial).unwrap();
        assert_eq!(
            serial.validate_for(Transport::HidPos).unwrap_err().key,
            "protocol"
        );
        let hid = parse("protocol = \"hid-pos\"");
        hid.validate_for(Transport::HidPos).unwrap();
        assert_eq!(
            hid.validate_for(Transport::Serial).unwrap_err().key,
            "protocol"
        );
        let e = hid.validate_for(Transport::Keyboard).unwrap_err();
        assert!(e.problem.contains("no channel back"), "{e}");
        assert!(e.fix.contains("led"), "{e}");
        // The LED alone fits every scanner.
        let led = parse("led = \"ACT\"");
        for t in [Transport::Serial, Transport::HidPos, Transport::Keyboard] {
            led.validate_for(t).unwrap();
        }
    }

    #[test]
    fn due_until_the_bound_and_late_after_it() {
        let cfg = parse("led = \"ACT\"\nmax_delay_ms = 500");
        assert!(cfg.due(Duration::from_millis(0)).is_ok());
        assert!(cfg.due(Duration::from_millis(500)).is_ok());
        let late = cfg.due(Duration::from_millis(501)).unwrap_err();
        assert_eq!(late.after, Duration::from_millis(501));
        assert_eq!(late.bound, Duration::from_millis(500));
    }
}
