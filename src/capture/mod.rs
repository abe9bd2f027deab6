//! Capture: stamp every raw read with its identity and time, then decode it.
//!
//! `RawScan` (bytes from a source) → [`Scan`] (UUIDv7, UTC + boot-time stamps,
//! decoded product identity or the reason it was rejected). Stamping happens
//! on the source task right after the frame ends, so the capture time is the
//! time of the read, not the time the outbox got to it.

pub mod barcode;
pub mod clock;

use barcode::{DecodeError, Decoded, ProductId};
pub use clock::CaptureTime;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use uuid::Uuid;

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

/// What a scanner profile contributes to every scan it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// Scanner name (stable, from config).
    pub scanner: String,
    /// What a read means.
    pub scan_type: ScanType,
    /// Units per read.
    pub quantity: u32,
    /// The gateway the scanner belongs to, part of the content key; `None`
    /// for a scanner declared `shared` (heard by several gateways, judged
    /// facility-wide).
    pub owner: Option<String>,
    /// How a read of a label without a serial is judged (not part of the
    /// content key).
    pub unserialised: Unserialised,
}

/// How a scanner's reads of a label that carries no serial (a GTIN + lot
/// 2D code, the linear UPC/EAN every package carries) are judged: two
/// identical items, a re-scan of one and a trigger's double-fire all read
/// the same bytes, so an echo of such a label is *ambiguous*
/// (docs/design.md, "Unserialised labels"). A label with a serial is one
/// item: its echoes are never ambiguous, whatever the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Unserialised {
    /// The gateway's echo window (`[dedup] window_ms`), as for serialised
    /// labels: a second identical item inside it is taken for an echo
    /// (counted and audited as ambiguous). For dispensing counters, where
    /// one item is scanned once.
    #[default]
    Window,
    /// Only a read this close after a commit of the same label is an echo
    /// (a trigger's double-fire); a later re-read is another item. For
    /// receiving and counting stations. With `ack = true`, a frame the
    /// scanner may be resending (read while one of the same bytes waited
    /// for its ACK) is still judged by the full window.
    DoubleFire {
        /// The short window (ms).
        ms: u32,
    },
    /// The window, as [`Unserialised::Window`], and the scanner is told
    /// that the read was taken for an echo (its `feedback`), so staff who
    /// scanned another item can declare it with the REPEAT label.
    Ask,
}

impl Unserialised {
    /// The name used in the config, the outbox and the audit trail.
    pub fn as_str(self) -> &'static str {
        match self {
            Unserialised::Window => "window",
            Unserialised::DoubleFire { .. } => "double-fire",
            Unserialised::Ask => "ask",
        }
    }
}

/// One frame as a source delivered it.
#[derive(Debug)]
pub struct RawScan {
    /// The frame's bytes, framing removed (truncated to the limit if over-long).
    pub bytes: Vec<u8>,
    /// Set when the source could not frame the read cleanly (e.g. over-long).
    pub framing_error: Option<String>,
}

impl RawScan {
    /// Decode the frame (dates against `year`), or give its framing error:
    /// the one interpretation of a raw read, used by capture and by
    /// `scangate decode --hid`.
    pub fn decode(&self, year: i32) -> Result<Decoded, DecodeError> {
        match &self.framing_error {
            Some(reason) => Err(DecodeError(reason.clone())),
            None => barcode::decode_with_year(&self.bytes, year),
        }
    }
}

/// A stamped scan: what the outbox stores.
#[derive(Debug, Clone)]
pub struct Scan {
    /// Minted once here; carried through every retry and replay.
    pub uuid: Uuid,
    /// Scanner profile at the time of the read.
    pub profile: Profile,
    /// When it was read.
    pub time: CaptureTime,
    /// The frame's bytes (kept in the outbox only, never in the audit trail).
    pub raw: Vec<u8>,
    /// The decoded barcode, or why it was rejected.
    pub decoded: Result<Decoded, DecodeError>,
    /// Read while a frame of the same bytes from its scanner waited for
    /// its ACK (`ack = true`): the scanner may be resending it, so an echo
    /// of it is certain, not ambiguous. Always false for a scanner that
    /// is not acknowledged (it never resends).
    pub resend: bool,
    /// This read is a control label: what it declares (`repeat`,
    /// `quantity 3`). Never a pick; its source set it ([`crate::controls`]).
    pub control: Option<String>,
    /// The operator declared this read with a control label read just
    /// before it on the same scanner.
    pub declared: Option<Declared>,
}

/// A read the operator declared with a control label ([`Scan::declared`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declared {
    /// What (`repeat`, `quantity 3`).
    pub what: String,
    /// The units it counts, when it declares a quantity.
    pub quantity: Option<u32>,
    /// The control label's read.
    pub by: Uuid,
}

/// The echo window of a declared read of a label without a serial (ms):
/// another item even inside the gateway's window, yet a trigger's
/// double-fire of the declared read itself, or another gateway's copy of
/// it (a shared scanner), is still one pick.
pub const DECLARED_WINDOW_MS: i64 = 300;

impl Scan {
    /// Stamp and decode a raw read taken now.
    pub fn capture(profile: &Profile, raw: RawScan) -> Scan {
        let time = CaptureTime::now();
        Scan::at(profile, raw, time)
    }

    /// Stamp and decode a raw read with a given capture time (replays, tests).
    pub fn at(profile: &Profile, raw: RawScan, time: CaptureTime) -> Scan {
        // Dates are read against the capture year, so a replay in a new year
        // decodes exactly as it did live.
        let decoded = raw.decode(time.year());
        Scan {
            uuid: Uuid::now_v7(),
            profile: profile.clone(),
            time,
            raw: raw.bytes,
            decoded,
            resend: false,
            control: None,
            declared: None,
        }
    }

    /// The units this read counts: a declared quantity, else its
    /// scanner's (the content key keeps the scanner's, so an echo of a
    /// declared read is still recognised).
    pub fn quantity(&self) -> u32 {
        self.declared
            .as_ref()
            .and_then(|d| d.quantity)
            .unwrap_or(self.profile.quantity)
    }

    /// The label's serial, if it decoded and carries one.
    pub fn serial(&self) -> Option<&str> {
        self.decoded.as_ref().ok()?.product.serial.as_deref()
    }

    /// This scan's own echo window, when its scanner's policy for
    /// labels without a serial gives it one narrower than the gateway's:
    /// `double-fire`, unless the scanner may be resending the frame.
    /// A declared read of a label without a serial: [`DECLARED_WINDOW_MS`]
    /// (a serialised label is one item, declared or not).
    pub fn own_window(&self) -> Option<crate::model::EchoWindow> {
        use crate::model::EchoWindow;
        if self.declared.is_some() && self.serial().is_none() && self.decoded.is_ok() {
            return Some(EchoWindow::from_ms(DECLARED_WINDOW_MS));
        }
        match self.profile.unserialised {
            Unserialised::DoubleFire { ms } if self.serial().is_none() && !self.resend => {
                Some(EchoWindow::from_ms(i64::from(ms)))
            }
            _ => None,
        }
    }

    /// The policy that judges this scan's echoes, if its label decoded
    /// without a serial (a serialised or rejected scan has none).
    pub fn unserialised(&self) -> Option<Unserialised> {
        let decoded = self.decoded.as_ref().ok()?;
        decoded
            .product
            .serial
            .is_none()
            .then_some(self.profile.unserialised)
    }
}

/// Content key: SHA-256 (hex) over facility, the owning gateway (a scanner
/// not declared `shared`), scanner, scan type, quantity and the canonical
/// product identity. No time component (time is invariant 4's job): two
/// reads of one label by one scanner profile share it. A shared scanner's
/// key (`v1`) names no gateway, so its echoes heard by several gateways
/// collapse facility-wide; a gateway's own scanner's (`v2`) does, so two
/// gateways whose scanners share a name never take each other's picks for
/// echoes.
pub fn content_key(facility: &str, profile: &Profile, product: &ProductId) -> String {
    let mut h = Sha256::new();
    match &profile.owner {
        None => h.update(b"scangate-content-key-v1\x1f"),
        Some(gateway) => {
            h.update(b"scangate-content-key-v2\x1f");
            h.update(gateway.as_bytes());
            h.update([0x1f]);
        }
    }
    for part in [
        facility.as_bytes(),
        profile.scanner.as_bytes(),
        profile.scan_type.as_str().as_bytes(),
        profile.quantity.to_string().as_bytes(),
    ] {
        h.update(part);
        h.update([0x1f]);
    }
    h.update(product.canonical_bytes());
    hex32(&h.finalize().into())
}

/// 32 bytes (a SHA-256: a content key, an entry or chain hash) as the 64
/// lowercase hex digits the database and the audit trail keep. (The `hex`
/// crate's `encode` builds its string a `char` at a time, three times per
/// scan on the hot path.)
pub fn hex32(bytes: &[u8; 32]) -> String {
    let mut out = [0u8; 64];
    hex::encode_to_slice(bytes, &mut out).expect("64 digits for 32 bytes");
    String::from_utf8(out.to_vec()).expect("hex digits are ASCII")
}

/// The 32 bytes of a hex content key as [`content_key`] writes it (zeros
/// for a string that is not one).
pub fn key_bytes(key: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    let _ = hex::decode_to_slice(key, &mut out);
    out
}

impl Scan {
    /// This scan's content key in `facility`, if it names a dispensable
    /// product; else why it is rejected (never the scanned data).
    pub fn content_key(&self, facility: &str) -> Result<String, String> {
        if let Some(what) = &self.control {
            return Err(format!("a control label ({what}): never a pick"));
        }
        match &self.decoded {
            Ok(d) if d.product.is_dispensable() => {
                Ok(content_key(facility, &self.profile, &d.product))
            }
            Ok(_) => Err("not a dispensable product: the barcode carries no GTIN".to_string()),
            Err(e) => Err(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn hex32_is_lowercase_hex_of_every_byte() {
        let mut bytes = [0u8; 32];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(37) ^ 0xa5;
        }
        assert_eq!(super::hex32(&bytes), hex::encode(bytes));
        assert_eq!(super::hex32(&[0xff; 32]), "f".repeat(64));
    }

    use super::*;

    #[test]
    fn a_label_keys_alike_before_and_after_the_clock_is_synchronised() {
        // An unsynchronised 1970 clock decodes dates as this century's.
        let at = |utc_ms, synced| CaptureTime {
            utc_ms,
            boot_ns: 0,
            boot_id: "b".into(),
            synced,
        };
        let raw = RawScan {
            bytes: b"]d201003077731050251728123121SN1".to_vec(),
            framing_error: None,
        };
        let before = raw.decode(at(0, false).year()).unwrap();
        let after = raw.decode(at(1_800_000_000_000, true).year()).unwrap();
        assert_eq!(before.product, after.product);
    }

    /// A gateway's own scanner's content keys name the gateway (a cloned
    /// config on another gateway never matches them); a shared scanner's
    /// do not, and stay those of the first key version.
    #[test]
    fn only_a_shared_scanners_keys_are_the_same_on_every_gateway() {
        let product = barcode::decode_with_year(b"]d201003077731050251728123121SN1", 2026)
            .unwrap()
            .product;
        let profile = |owner: Option<&str>| Profile {
            scanner: "counter-1".into(),
            scan_type: ScanType::Dispense,
            quantity: 1,
            owner: owner.map(str::to_string),
            unserialised: Unserialised::Window,
        };
        let key = |owner| content_key("f", &profile(owner), &product);
        assert_ne!(key(Some("gw-a")), key(Some("gw-b")));
        assert_ne!(key(Some("gw-a")), key(None));
        assert_eq!(key(Some("gw-a")), key(Some("gw-a")));
        // The shared scanner's key, as the first key version computed it.
        let mut h = Sha256::new();
        h.update(b"scangate-content-key-v1\x1ff\x1fcounter-1\x1fdispense\x1f1\x1f");
        h.update(product.canonical_bytes());
        assert_eq!(key(None), hex::encode(h.finalize()));
    }
}
