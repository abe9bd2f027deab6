//! A batch as it is POSTed: the exact body bytes of its entries in the
//! sink's format, its content type, and its `Idempotency-Key` — all made
//! once, before the first POST, and held ([`super::held`]) so every retry
//! sends the same bytes under the same key.

use super::config::SinkFormat;
use crate::ledger::LedgerEntry;
use crate::ledger::epcis::{self, DocumentWriter, EpcisError, Observation};
use sha2::{Digest, Sha256};

/// A batch ready to be held and sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// Its first entry's ledger position.
    pub first_seq: i64,
    /// Its last entry's position: the cursor after a 2xx.
    pub last_seq: i64,
    /// Its last entry's scan, acknowledged with the position.
    pub last_uuid: String,
    /// How many entries.
    pub entries: i64,
    /// The `Idempotency-Key` header ([`idempotency_key`]).
    pub key: String,
    /// The format the body is in.
    pub format: SinkFormat,
    /// The exact body.
    pub body: Vec<u8>,
}

/// The `Content-Type` of a body in `format`.
pub fn content_type(format: SinkFormat) -> &'static str {
    match format {
        SinkFormat::Json => "application/x-ndjson",
        SinkFormat::Epcis => "application/ld+json",
    }
}

/// Hex SHA-256 over the sink's name, the format and the batch's scan
/// UUIDs (each followed by a newline): the same batch of the same sink
/// always has the same key, across retries and restarts.
pub fn idempotency_key<'a>(
    sink: &str,
    format: SinkFormat,
    uuids: impl IntoIterator<Item = &'a str>,
) -> String {
    let mut h = Sha256::new();
    for part in [sink, format.as_str()] {
        h.update(part.as_bytes());
        h.update(b"\n");
    }
    for uuid in uuids {
        h.update(uuid.as_bytes());
        h.update(b"\n");
    }
    hex::encode(h.finalize())
}

/// The batch of `entries` (not empty, in ledger order) for sink `sink`:
/// JSON lines (each entry as `ledger export` prints it), or one
/// `EPCISDocument` dated `now_ms` whose events are the entries' (with the
/// facility's `gln`). An entry that cannot be an EPCIS event is the error.
pub fn build(
    sink: &str,
    format: SinkFormat,
    entries: &[LedgerEntry],
    gln: Option<&str>,
    now_ms: i64,
) -> Result<Batch, EpcisError> {
    let (first, last) = match (entries.first(), entries.last()) {
        (Some(f), Some(l)) => (f, l),
        _ => unreachable!("a batch is built of at least one entry"),
    };
    let mut body = Vec::with_capacity(entries.len() * 400);
    match format {
        SinkFormat::Json => {
            for e in entries {
                serde_json::to_writer(&mut body, e).expect("an entry serialises");
                body.push(b'\n');
            }
        }
        SinkFormat::Epcis => {
            let created = crate::capture::clock::rfc3339_ms(now_ms);
            let mut doc = DocumentWriter::begin(&mut body, &created).expect("writing to a Vec");
            for e in entries {
                let event = epcis::object_event(&Observation::from(e), gln)?;
                doc.event(&mut body, &event).expect("writing to a Vec");
            }
            doc.finish(&mut body).expect("writing to a Vec");
        }
    }
    Ok(Batch {
        first_seq: first.seq,
        last_seq: last.seq,
        last_uuid: last.scan_uuid.clone(),
        entries: entries.len() as i64,
        key: idempotency_key(sink, format, entries.iter().map(|e| e.scan_uuid.as_str())),
        format,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: i64, uuid: &str) -> LedgerEntry {
        LedgerEntry {
            seq,
            scan_uuid: uuid.into(),
            gateway: "gw".into(),
            scanner: "counter-1".into(),
            captured_at: "2026-12-04T12:00:00.000Z".into(),
            clock_synced: true,
            scan_type: "dispense".into(),
            quantity: 1,
            gtin: Some("00312345678906".into()),
            ndc10: None,
            lot: Some("L1".into()),
            serial: Some(format!("S{seq}")),
            expiry: None,
            symbology: "]d2".into(),
            content_key: "k".into(),
            dea_schedule: None,
            alerts: Vec::new(),
        }
    }

    /// The key depends on the sink, the format and the scans, nothing
    /// else; JSON bodies are the entries' lines; an EPCIS body is one
    /// document whose eventIDs are the scans'.
    #[test]
    fn the_key_names_sink_format_and_scans_and_the_body_holds_each_entry() {
        let es = [entry(3, "u3"), entry(4, "u4")];
        let a = build("inv", SinkFormat::Json, &es, None, 0).unwrap();
        assert_eq!((a.first_seq, a.last_seq, a.entries), (3, 4, 2));
        assert_eq!(a.last_uuid, "u4");
        let again = build("inv", SinkFormat::Json, &es, None, 99).unwrap();
        assert_eq!(a, again, "the same batch, the same bytes and key");
        let lines: Vec<&[u8]> = a.body.split(|b| *b == b'\n').collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], serde_json::to_vec(&es[0]).unwrap());
        assert_ne!(
            a.key,
            build("other", SinkFormat::Json, &es, None, 0).unwrap().key
        );
        let e = build("inv", SinkFormat::Epcis, &es, None, 0).unwrap();
        assert_ne!(a.key, e.key);
        let doc: serde_json::Value = serde_json::from_slice(&e.body).unwrap();
        let ids: Vec<&str> = doc["epcisBody"]["eventList"]
            .as_array()
            .unwrap()
            .iter()
            .map(|ev| ev["eventID"].as_str().unwrap())
            .collect();
        assert_eq!(ids, [epcis::event_id("u3"), epcis::event_id("u4")]);
        assert_eq!(a.key.len(), 64);
    }
}
