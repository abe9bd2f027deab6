//! Feedback to the person at the counter: what a scanner is told once its
//! read is decided, as the bytes its protocol needs.
//!
//! Off by default (like `ack`); a `feedback` table in a `[[scanner]]` entry
//! turns it on ([`FeedbackConfig`]). This module is pure: it builds bytes
//! and output reports and drives a gateway LED; sending them is the
//! source's business.
//!
//! - [`Told`] (the ground floor's, [`crate::model::Told`]): the eleven
//!   things a scanner can be told.
//! - [`ssi`] (Zebra SSI packets), [`honeywell`] (Host ACK escape
//!   commands), [`datalogic`] (single-character host commands), raw bytes
//!   for any other make: [`serial_bytes`].
//! - [`hid_pos`]: HID POS output reports on the Bar Code Scanner page
//!   (0x8C), found in the device's report descriptor, never assumed.
//! - [`led`]: the gateway's own indicator, a Linux LED class device, for
//!   scanners with no channel back (keyboard wedges) or as well as one.
//!
//! The signal follows the decision and never delays or replaces the
//! durable ACK. A signal for a decision that came later than
//! `max_delay_ms` after the read is skipped ([`FeedbackConfig::due`]); the
//! caller counts the skip. Nothing here waits for the scanner's answer and
//! nothing is retried: a lost signal stays lost. Bytes, patterns and
//! citations: `docs/scanner-feedback.md`.

pub(crate) mod config;
pub(crate) mod datalogic;
pub mod hid_pos;
pub(crate) mod honeywell;
pub(crate) mod led;
pub mod ssi;

pub use crate::model::Told;
pub use config::{FeedbackConfig, Late, Protocol, Transport};

/// The bytes a serial scanner is sent for `told`: the built-in protocol's,
/// or for `protocol = "raw"` the configured byte string (unset: nothing).
/// Empty means "send nothing". `hid-pos` has no serial bytes (see
/// [`hid_pos`]), so it gives none.
pub fn serial_bytes(cfg: &FeedbackConfig, told: Told) -> Vec<u8> {
    match cfg.protocol {
        Some(Protocol::ZebraSsi) => ssi::bytes(told),
        Some(Protocol::Honeywell) => honeywell::bytes(told),
        Some(Protocol::Datalogic) => datalogic::bytes(told).to_vec(),
        Some(Protocol::Raw) => cfg
            .raw(told)
            .or_else(|| told.is_alert().then(|| cfg.raw(Told::Committed)).flatten())
            .map(|b| b.as_bytes().to_vec())
            .unwrap_or_default(),
        Some(Protocol::HidPos) | None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_config_keys() {
        let names: Vec<&str> = Told::ALL.iter().map(|t| t.as_str()).collect();
        assert_eq!(
            names,
            [
                "committed",
                "echo",
                "ambiguous",
                "rejected",
                "waiting",
                "control",
                "lapsed",
                "expired",
                "expiring",
                "recalled",
                "unknown",
                "suspect"
            ]
        );
        assert_eq!(Told::Ambiguous.to_string(), "ambiguous");
    }

    #[test]
    fn raw_bytes_are_sent_as_configured_and_unset_is_nothing() {
        let cfg: FeedbackConfig =
            toml::from_str("protocol = \"raw\"\ncommitted = \"\\u0007\"\nrejected = [0x1b, 0x38]")
                .unwrap();
        cfg.validate().unwrap();
        assert_eq!(serial_bytes(&cfg, Told::Committed), [0x07]);
        assert_eq!(serial_bytes(&cfg, Told::Rejected), [0x1b, 0x38]);
        assert!(serial_bytes(&cfg, Told::Echo).is_empty());
    }

    #[test]
    fn hid_pos_and_led_only_have_no_serial_bytes() {
        for text in ["protocol = \"hid-pos\"", "led = \"ACT\""] {
            let cfg: FeedbackConfig = toml::from_str(text).unwrap();
            for told in Told::ALL {
                assert!(serial_bytes(&cfg, told).is_empty(), "{text} {told}");
            }
        }
    }

    #[test]
    fn built_in_protocols_dispatch_to_their_encoders() {
        for (name, f) in [
            ("zebra-ssi", ssi::bytes as fn(Told) -> Vec<u8>),
            ("honeywell", honeywell::bytes),
            ("datalogic", |t| datalogic::bytes(t).to_vec()),
        ] {
            let cfg: FeedbackConfig = toml::from_str(&format!("protocol = \"{name}\"")).unwrap();
            for told in Told::ALL {
                assert_eq!(serial_bytes(&cfg, told), f(told), "{name} {told}");
            }
        }
    }
}
