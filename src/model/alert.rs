//! What the checks at the counter find about a read's product
//! ([`Alert`]), and which checks a scanner runs ([`Check`]): the
//! vocabulary the checks, the gate, the signals and the events share.

use super::Told;
use std::fmt;

/// An alert about a read's product. Declared most urgent first: a read
/// with several is told the first.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Alert {
    /// An ongoing recall names the product (and its lot, or every lot).
    Recalled,
    /// A `receive` read of a serialised item (GTIN + serial) this
    /// facility received before, beyond the echo window: a possible
    /// counterfeit or a duplicated shipment.
    Suspect,
    /// The label's expiry date (AI 17) is before the day of the read.
    Expired,
    /// A US drug (its GTIN carries an NDC) the loaded product data does
    /// not list.
    Unknown,
    /// The label expires within `[checks] expiry_warn_days` of the read.
    Expiring,
}

impl Alert {
    /// Every kind, most urgent first.
    pub const ALL: [Alert; 5] = [
        Alert::Recalled,
        Alert::Suspect,
        Alert::Expired,
        Alert::Unknown,
        Alert::Expiring,
    ];

    /// The lower-case name, as in the metric's `kind` label and the docs.
    pub fn as_str(self) -> &'static str {
        self.told().as_str()
    }

    /// What it says of the item, for the log ("the item …").
    pub fn what(self) -> &'static str {
        match self {
            Alert::Recalled => "named by an ongoing recall",
            Alert::Suspect => "received before (its serial number)",
            Alert::Expired => "past its expiry date",
            Alert::Unknown => "not in the product data",
            Alert::Expiring => "close to its expiry date",
        }
    }

    /// What the scanner is told of a read with this alert.
    pub fn told(self) -> Told {
        match self {
            Alert::Recalled => Told::Recalled,
            Alert::Suspect => Told::Suspect,
            Alert::Expired => Told::Expired,
            Alert::Unknown => Told::Unknown,
            Alert::Expiring => Told::Expiring,
        }
    }
}

impl fmt::Display for Alert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One alert as the ledger entry and the audit record keep it: its kind
/// and, for a recall, which recall and how it met the read's lot.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertFound {
    /// What was found.
    pub kind: Alert,
    /// A recall's `recall_number` (e.g. `D-0123-2024`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recall_number: Option<String>,
    /// A recall's class (`Class I`, `Class II`, `Class III`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recall_class: Option<String>,
    /// How a recall met the read's lot: `lot` (it names it), `every_lot`
    /// (it names none), `lot_not_read` (it names lots, the label has none:
    /// it may apply).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recall_lot: Option<String>,
    /// A suspect read: when the serial was first received (RFC 3339,
    /// UTC, ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_received_at: Option<String>,
    /// A suspect read: the gateway that first received it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_received_gateway: Option<String>,
    /// A suspect read: the scanner that first received it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_received_scanner: Option<String>,
    /// A suspect read: the read that first received it (its scan UUID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_received_scan: Option<String>,
}

impl AlertFound {
    /// An alert that is not a recall.
    pub fn of(kind: Alert) -> AlertFound {
        AlertFound {
            kind,
            recall_number: None,
            recall_class: None,
            recall_lot: None,
            first_received_at: None,
            first_received_gateway: None,
            first_received_scanner: None,
            first_received_scan: None,
        }
    }
}

/// A `receive` read of a serialised item (its GTIN and serial): what the
/// facility keeps of the first one, to tell a later one
/// ([`Alert::Suspect`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The read's scan UUID.
    pub scan_uuid: String,
    /// Its capture time (Unix ms; facility time with a facility store).
    pub at_ms: i64,
    /// The gateway that recorded it.
    pub gateway: String,
    /// The scanner that read it.
    pub scanner: String,
}

impl Received {
    /// Whether a read `scan_uuid` captured at `at_ms`, receiving the item
    /// this first receipt did, is suspect: another read, outside the echo
    /// window `window_ms` of this one (within it, it is the same pick
    /// heard twice: a shared scanner's copy on another gateway, a
    /// double-fire).
    pub fn makes_suspect(&self, scan_uuid: &str, at_ms: i64, window_ms: i64) -> bool {
        self.scan_uuid != scan_uuid && (at_ms - self.at_ms).abs() > window_ms
    }
}

/// What the checks found about a read's item: its DEA schedule, from the
/// product data, and every alert, most urgent first. Kept with a commit's
/// ledger entry and with the read's audit record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Findings {
    /// The DEA schedule as the NDC Directory writes it (`CI` … `CV`),
    /// when the product data lists the item as controlled.
    pub dea_schedule: Option<String>,
    /// The alerts, most urgent first.
    pub alerts: Vec<AlertFound>,
}

impl Findings {
    /// The alert the scanner is told: the most urgent.
    pub fn told(&self) -> Option<Alert> {
        self.alerts.first().map(|a| a.kind)
    }

    /// Nothing found: no schedule, no alert.
    pub fn is_empty(&self) -> bool {
        self.dea_schedule.is_none() && self.alerts.is_empty()
    }
}

/// A check a scanner runs on its reads (`checks = [...]` in its
/// `[[scanner]]` entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Check {
    /// Expired and expiring labels (AI 17); needs no product data.
    Expiry,
    /// Ongoing recalls (`scangate recalls import`).
    Recall,
    /// Products missing from the product data (`scangate products
    /// import`).
    Unknown,
    /// A serialised item received twice ([`Alert::Suspect`]; `receive`
    /// reads only; needs no product data).
    Suspect,
}

impl Check {
    /// The checks of a scanner without a `checks` key, by what its reads
    /// mean: every one, but a `waste` or `return` read of an expired item
    /// is what those are for, so those skip expiry.
    pub fn defaults_for(scan_type: &str) -> &'static [Check] {
        match scan_type {
            "waste" | "return" => &[Check::Recall, Check::Unknown, Check::Suspect],
            _ => &[Check::Expiry, Check::Recall, Check::Unknown, Check::Suspect],
        }
    }
}
