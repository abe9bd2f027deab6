//! The ledger as GS1 EPCIS 2.0 (JSON-LD, CBV 2.0): one `ObjectEvent` per
//! ledger entry ([`object_event`]), and the `EPCISDocument` around them
//! ([`DocumentWriter`]). One mapping for every way an entry leaves the
//! gateway (`ledger export --format epcis`, with or without `--follow`,
//! and a `[[sink]]` with `format = "epcis"`), so an entry is the same
//! event wherever a consumer reads it.
//!
//! The mapping and why (docs/integrator.md, "EPCIS 2.0"):
//! - `action` is `OBSERVE`: the gateway saw an existing object; it neither
//!   commissions identifiers (`ADD`) nor retires them (`DELETE`).
//! - What: a serial gives one instance, `epcList` with the GS1 Digital Link
//!   URI `https://id.gs1.org/01/{gtin14}/21/{serial}`; no serial gives a
//!   class and a count, `quantityList` with `…/01/{gtin14}/10/{lot}` (or
//!   `…/01/{gtin14}` without a lot) and the entry's `quantity`. Digital Link
//!   rather than `urn:epc:id:sgtin:…`: the SGTIN URN splits the GTIN at the
//!   GS1 company prefix, whose length only GS1's prefix table knows; the
//!   Digital Link form is equivalent in EPCIS 2.0 and needs no table.
//! - Why: `bizStep` and `disposition` from `scan_type` ([`business_step`]).
//! - Where: `readPoint` (and `bizLocation` while the objects stay in the
//!   facility) `https://id.gs1.org/414/{gln}` from `[gateway] gln`; absent
//!   without one.
//! - When: `eventTime` the entry's `captured_at` (UTC), offset `+00:00`.
//! - `eventID` `urn:uuid:{scan_uuid}`: the same for the entry however often
//!   and wherever it is exported, so a consumer drops copies by it.
//! - No `ilmd`: EPCIS puts instance/lot master data only on events that
//!   create the objects (`ADD`, commissioning), and GS1's JSON schema
//!   refuses `ilmd` on an `OBSERVE` event; the lot is in the class URI.
//!
//! - scangate's extension ([`NAMESPACE`], prefix `scangate`): what the
//!   checks at the counter found, `scangate:deaSchedule` and
//!   `scangate:alerts` (each alert's `scangate:kind`, and a recall's
//!   `scangate:recallNumber`, `scangate:recallClass`, `scangate:recallLot`;
//!   a suspect read's `scangate:firstReceivedAt` and
//!   `scangate:firstReceivedEvent`, the first receipt's `eventID`), only
//!   on an event whose entry has them. EPCIS 2.0 lets an event carry
//!   any property named by a URI; the prefix is declared in that event's
//!   own `@context` (the document's, and every event without them, stay
//!   as they were), so GS1's schema accepts the event and a JSON-LD reader
//!   expands the names.
//!
//! Nothing else of the entry goes out (no scanner or gateway names, no
//! content key): nothing PHI-bearing is in an entry, and the event carries
//! less than the entry.

use super::LedgerEntry;
use crate::model::AlertFound;
use serde::{Deserialize, Serialize};
use std::io::Write;

/// The JSON-LD context of EPCIS 2.0, as GS1 publishes it.
pub const CONTEXT: &str = "https://ref.gs1.org/standards/epcis/2.0.0/epcis-context.jsonld";

/// The namespace of scangate's EPCIS extension properties (prefix
/// `scangate`): a URN, named once and never changed, not a web address to
/// resolve.
pub const NAMESPACE: &str = "urn:scangate:epcis:";

/// An event's `@context`, when it has one.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
#[serde(untagged)]
pub enum Context {
    /// A standalone event without scangate's properties: EPCIS 2.0's.
    Plain(&'static str),
    /// An event with scangate's properties inside a document (whose
    /// context is EPCIS 2.0's): the `scangate` prefix.
    Prefix(Prefix),
    /// A standalone event with scangate's properties: EPCIS 2.0's, then
    /// the `scangate` prefix.
    Extended(&'static str, Prefix),
}

/// The `scangate` prefix's definition.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Prefix {
    scangate: &'static str,
}

/// The `scangate` prefix: [`NAMESPACE`].
pub const PREFIX: Prefix = Prefix {
    scangate: NAMESPACE,
};

/// The GS1 Digital Link resolver domain the identifiers are written under
/// (EPCIS 2.0's canonical form of a Digital Link URI).
const DL_DOMAIN: &str = "https://id.gs1.org";

/// What an event is made from: the fields of a ledger entry it uses, the
/// same from the embedded ledger ([`From<&LedgerEntry>`]) and from the
/// facility stream (its JSON objects deserialise into this).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Observation {
    /// The committed scan: the event's ID.
    pub scan_uuid: String,
    /// Capture time, RFC 3339 UTC: the event's time.
    pub captured_at: String,
    /// receive | dispense | waste | return | adjust: its business step.
    pub scan_type: String,
    /// Units, for an entry without a serial.
    pub quantity: i64,
    /// GTIN-14.
    #[serde(default)]
    pub gtin: Option<String>,
    /// Batch / lot (AI 10).
    #[serde(default)]
    pub lot: Option<String>,
    /// Serial number (AI 21).
    #[serde(default)]
    pub serial: Option<String>,
    /// The DEA schedule the checks found (absent on older entries).
    #[serde(default)]
    pub dea_schedule: Option<String>,
    /// The alerts the checks found.
    #[serde(default)]
    pub alerts: Vec<AlertFound>,
}

impl From<&LedgerEntry> for Observation {
    fn from(e: &LedgerEntry) -> Self {
        Observation {
            scan_uuid: e.scan_uuid.clone(),
            captured_at: e.captured_at.clone(),
            scan_type: e.scan_type.clone(),
            quantity: e.quantity,
            gtin: e.gtin.clone(),
            lot: e.lot.clone(),
            serial: e.serial.clone(),
            dea_schedule: e.dea_schedule.clone(),
            alerts: e.alerts.clone(),
        }
    }
}

/// Why an entry cannot be an event.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EpcisError {
    /// No GTIN: nothing to name the object by. (The gate rejects reads
    /// without a GTIN, so a ledger entry always has one.)
    #[error("ledger entry {0} has no GTIN, so no EPCIS identifier")]
    NoGtin(String),
    /// A `scan_type` this version does not know.
    #[error("ledger entry {0} has scan_type {1:?}, which has no EPCIS mapping")]
    UnknownScanType(String, String),
    /// A facility stream entry without the fields an event needs.
    #[error("facility stream entry {0} is not a ledger entry ({1})")]
    Unreadable(String, String),
}

/// The CBV 2.0 business step and disposition of a `scan_type`, and whether
/// the objects are at the facility after the event (then `bizLocation` is
/// the facility). `None` for a scan type this version does not know.
///
/// | scan_type | bizStep | disposition | bizLocation |
/// |---|---|---|---|
/// | receive | receiving | in_progress | the facility |
/// | dispense | dispensing | dispensed | — |
/// | waste | destroying | destroyed | — |
/// | return | shipping | returned | — |
/// | adjust | cycle_counting | — | the facility |
pub fn business_step(scan_type: &str) -> Option<(&'static str, Option<&'static str>, bool)> {
    Some(match scan_type {
        "receive" => ("receiving", Some("in_progress"), true),
        "dispense" => ("dispensing", Some("dispensed"), false),
        "waste" => ("destroying", Some("destroyed"), false),
        // scangate's `return` is stock sent back to a supplier or reverse
        // distributor (capture::ScanType): it leaves.
        "return" => ("shipping", Some("returned"), false),
        // CBV has no inventory adjustment; the read says the item was
        // counted here, which cycle_counting records. Its state is not
        // known, so no disposition.
        "adjust" => ("cycle_counting", None, true),
        _ => return None,
    })
}

/// An EPCIS 2.0 `ObjectEvent`, its fields in the standard's order.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ObjectEvent {
    /// Its own JSON-LD context: on a standalone event ([`standalone`]),
    /// and inside a document on an event with scangate's properties (the
    /// `scangate` prefix; events without them, and the document, are
    /// as they always were).
    #[serde(rename = "@context", skip_serializing_if = "Option::is_none")]
    pub context: Option<Context>,
    /// Always `ObjectEvent`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// `urn:uuid:{scan_uuid}`.
    #[serde(rename = "eventID")]
    pub event_id: String,
    /// The capture time, RFC 3339 UTC.
    pub event_time: String,
    /// `+00:00`.
    pub event_time_zone_offset: &'static str,
    /// The one instance (a serial): its Digital Link URI.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epc_list: Option<[String; 1]>,
    /// The class and the count (no serial).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quantity_list: Option<[Quantity; 1]>,
    /// Always `OBSERVE`.
    pub action: &'static str,
    /// CBV 2.0 business step.
    pub biz_step: &'static str,
    /// CBV 2.0 disposition, where one fits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disposition: Option<&'static str>,
    /// Where it was read: the facility.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_point: Option<Place>,
    /// Where the objects are after it, while they stay in the facility.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub biz_location: Option<Place>,
    /// The item's DEA schedule (scangate's extension).
    #[serde(
        rename = "scangate:deaSchedule",
        skip_serializing_if = "Option::is_none"
    )]
    pub dea_schedule: Option<String>,
    /// What the checks at the counter found (scangate's extension).
    #[serde(rename = "scangate:alerts", skip_serializing_if = "Vec::is_empty")]
    pub alerts: Vec<EventAlert>,
}

/// One alert of `scangate:alerts`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct EventAlert {
    /// `recalled`, `suspect`, `expired`, `unknown` or `expiring`.
    #[serde(rename = "scangate:kind")]
    pub kind: &'static str,
    /// A recall's number.
    #[serde(
        rename = "scangate:recallNumber",
        skip_serializing_if = "Option::is_none"
    )]
    pub recall_number: Option<String>,
    /// A recall's class.
    #[serde(
        rename = "scangate:recallClass",
        skip_serializing_if = "Option::is_none"
    )]
    pub recall_class: Option<String>,
    /// How a recall met the read's lot.
    #[serde(rename = "scangate:recallLot", skip_serializing_if = "Option::is_none")]
    pub recall_lot: Option<String>,
    /// A suspect read: when the package was first received.
    #[serde(
        rename = "scangate:firstReceivedAt",
        skip_serializing_if = "Option::is_none"
    )]
    pub first_received_at: Option<String>,
    /// A suspect read: the event of that first receipt (its `eventID`).
    #[serde(
        rename = "scangate:firstReceivedEvent",
        skip_serializing_if = "Option::is_none"
    )]
    pub first_received_event: Option<String>,
}

/// A `quantityList` element.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Quantity {
    /// The class: GTIN and lot, as a Digital Link URI.
    pub epc_class: String,
    /// How many (trade items: no unit of measure).
    pub quantity: i64,
}

/// A `readPoint` or `bizLocation`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Place {
    /// The location's Digital Link URI.
    pub id: String,
}

/// `event` made to travel alone (one a line with `--follow`): EPCIS
/// requires the `@context` on every event outside a document, with the
/// `scangate` prefix when the event has scangate's properties.
pub fn standalone(mut event: ObjectEvent) -> ObjectEvent {
    event.context = Some(match event.context {
        Some(_) => Context::Extended(CONTEXT, PREFIX),
        None => Context::Plain(CONTEXT),
    });
    event
}

/// The `ObjectEvent` of one ledger entry (without `@context`, but for the
/// `scangate` prefix when it has scangate's properties: a document
/// carries EPCIS's once; [`standalone`] adds it to an event that travels
/// alone).
/// `gln`: the facility's GLN (`[gateway] gln`), validated.
pub fn object_event(entry: &Observation, gln: Option<&str>) -> Result<ObjectEvent, EpcisError> {
    let gtin = entry
        .gtin
        .as_deref()
        .filter(|g| !g.is_empty())
        .ok_or_else(|| EpcisError::NoGtin(entry.scan_uuid.clone()))?;
    let Some((biz_step, disposition, stays)) = business_step(&entry.scan_type) else {
        return Err(EpcisError::UnknownScanType(
            entry.scan_uuid.clone(),
            entry.scan_type.clone(),
        ));
    };
    let serial = entry.serial.as_deref().filter(|s| !s.is_empty());
    let lot = entry.lot.as_deref().filter(|l| !l.is_empty());
    let place = gln.map(|gln| Place { id: location(gln) });
    let extended = entry.dea_schedule.is_some() || !entry.alerts.is_empty();
    Ok(ObjectEvent {
        context: extended.then_some(Context::Prefix(PREFIX)),
        kind: "ObjectEvent",
        event_id: event_id(&entry.scan_uuid),
        event_time: entry.captured_at.clone(),
        event_time_zone_offset: "+00:00",
        epc_list: serial.map(|serial| [sgtin(gtin, serial)]),
        quantity_list: serial.is_none().then(|| {
            [Quantity {
                epc_class: lgtin(gtin, lot),
                quantity: entry.quantity,
            }]
        }),
        action: "OBSERVE",
        biz_step,
        disposition,
        biz_location: place.clone().filter(|_| stays),
        read_point: place,
        dea_schedule: entry.dea_schedule.clone(),
        alerts: entry
            .alerts
            .iter()
            .map(|a| EventAlert {
                kind: a.kind.as_str(),
                recall_number: a.recall_number.clone(),
                recall_class: a.recall_class.clone(),
                recall_lot: a.recall_lot.clone(),
                first_received_at: a.first_received_at.clone(),
                first_received_event: a.first_received_scan.as_deref().map(event_id),
            })
            .collect(),
    })
}

/// The event ID of the entry of scan `scan_uuid`.
pub fn event_id(scan_uuid: &str) -> String {
    format!("urn:uuid:{scan_uuid}")
}

/// An item-level identifier (SGTIN) as a GS1 Digital Link URI.
pub fn sgtin(gtin14: &str, serial: &str) -> String {
    format!("{DL_DOMAIN}/01/{gtin14}/21/{}", percent_encode(serial))
}

/// A class-level identifier: the GTIN and, when there is one, the lot
/// (LGTIN), as a GS1 Digital Link URI.
pub fn lgtin(gtin14: &str, lot: Option<&str>) -> String {
    match lot {
        Some(lot) => format!("{DL_DOMAIN}/01/{gtin14}/10/{}", percent_encode(lot)),
        None => format!("{DL_DOMAIN}/01/{gtin14}"),
    }
}

/// A location (GLN) as a GS1 Digital Link URI.
pub fn location(gln: &str) -> String {
    format!("{DL_DOMAIN}/414/{gln}")
}

/// An AI value as a Digital Link path segment: every byte but the URI's
/// unreserved characters (`A-Z a-z 0-9 - . _ ~`) percent-encoded, as GS1
/// Digital Link asks of the characters of AI values (`/`, `%`, `&`, `+`,
/// `?`, …; GS1's character set 82 has no `~`).
pub fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The fields of an `EPCISDocument` before its body, in the standard's order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Head<'a> {
    #[serde(rename = "@context")]
    context: [&'static str; 1],
    #[serde(rename = "type")]
    kind: &'static str,
    schema_version: &'static str,
    creation_date: &'a str,
}

/// Writes one `EPCISDocument` as its events come, without holding them:
/// the header, each event on a line of its own, then the closing. The
/// output is one JSON value.
pub struct DocumentWriter {
    events: usize,
}

impl DocumentWriter {
    /// Write the document's opening, dated `creation_date` (RFC 3339).
    pub fn begin(out: &mut impl Write, creation_date: &str) -> std::io::Result<DocumentWriter> {
        let head = serde_json::to_vec(&Head {
            context: [CONTEXT],
            kind: "EPCISDocument",
            schema_version: "2.0",
            creation_date,
        })
        .map_err(std::io::Error::other)?;
        // `{…}` without its closing brace, then the body.
        out.write_all(&head[..head.len() - 1])?;
        out.write_all(b",\"epcisBody\":{\"eventList\":[\n")?;
        Ok(DocumentWriter { events: 0 })
    }

    /// Write one event of the list.
    pub fn event(&mut self, out: &mut impl Write, event: &impl Serialize) -> std::io::Result<()> {
        if self.events > 0 {
            out.write_all(b",\n")?;
        }
        serde_json::to_writer(&mut *out, event).map_err(std::io::Error::other)?;
        self.events += 1;
        Ok(())
    }

    /// Close the list and the document.
    pub fn finish(self, out: &mut impl Write) -> std::io::Result<()> {
        out.write_all(b"\n]}}\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn percent_encoding_keeps_only_unreserved_characters() {
        assert_eq!(percent_encode("ABC-12.x_~"), "ABC-12.x_~");
        assert_eq!(percent_encode("A/B%C&D+E?F"), "A%2FB%25C%26D%2BE%3FF");
        assert_eq!(
            percent_encode("a b!\"'()*,:;<=>"),
            "a%20b%21%22%27%28%29%2A%2C%3A%3B%3C%3D%3E"
        );
    }

    #[test]
    fn document_is_one_json_value() {
        let mut out = Vec::new();
        let mut doc = DocumentWriter::begin(&mut out, "2026-12-03T00:00:00.000Z").unwrap();
        doc.event(&mut out, &json!({"a": 1})).unwrap();
        doc.event(&mut out, &json!({"b": 2})).unwrap();
        doc.finish(&mut out).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["epcisBody"]["eventList"], json!([{"a": 1}, {"b": 2}]));
        assert_eq!(v["@context"], json!([CONTEXT]));
        let mut out = Vec::new();
        DocumentWriter::begin(&mut out, "2026-12-03T00:00:00.000Z")
            .unwrap()
            .finish(&mut out)
            .unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["epcisBody"]["eventList"], json!([]));
    }
}
