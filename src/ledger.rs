//! Ledger (embedded): one entry per committed scan, appended in the same
//! transaction as the decision, and exported as JSON lines for the facility's
//! inventory system.

use crate::capture::clock::rfc3339_ms;
use crate::store::{Store, StoreError};
use rusqlite::{Connection, params};
use serde::Serialize;

/// One ledger entry, with the field names of DESIGN.md.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct LedgerEntry {
    /// Position in the ledger (1, 2, …), the consumer's cursor.
    pub seq: i64,
    /// The committed scan.
    pub scan_uuid: String,
    /// Gateway that committed it.
    pub gateway: String,
    /// Scanner that read it.
    pub scanner: String,
    /// Capture time, RFC 3339 UTC with milliseconds.
    pub captured_at: String,
    /// Whether the gateway's wall clock was NTP-synchronised at capture.
    pub clock_synced: bool,
    /// receive | dispense | waste | return | adjust.
    pub scan_type: String,
    /// Units.
    pub quantity: i64,
    /// GTIN-14.
    pub gtin: Option<String>,
    /// NDC, 10 digits, when the GTIN carries one.
    pub ndc10: Option<String>,
    /// Batch / lot.
    pub lot: Option<String>,
    /// Serial number.
    pub serial: Option<String>,
    /// Expiry, YYYY-MM-DD.
    pub expiry: Option<String>,
    /// AIM symbology identifier.
    pub symbology: String,
    /// Content key (SHA-256 hex).
    pub content_key: String,
}

/// A ledger entry about to be appended (borrowed from the decided row).
pub(crate) struct NewEntry<'a> {
    pub scan_uuid: &'a str,
    pub gateway: &'a str,
    pub scanner: &'a str,
    pub captured_ms: i64,
    pub boot_id: &'a str,
    pub boot_ns: i64,
    pub clock_synced: bool,
    pub scan_type: &'a str,
    pub quantity: i64,
    pub gtin: Option<&'a str>,
    pub ndc10: Option<&'a str>,
    pub lot: Option<&'a str>,
    pub serial: Option<&'a str>,
    pub expiry: Option<&'a str>,
    pub symbology: &'a str,
    pub content_key: &'a str,
}

/// Append an entry; call it inside the decision's transaction. (The gate
/// already holds the row's fields, so this is one single-row `INSERT …
/// VALUES` — no read, and no statement journal as `INSERT … SELECT` had.)
pub(crate) fn append(tx: &Connection, e: &NewEntry<'_>, key_prefix: i64) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT INTO ledger (scan_uuid, gateway, scanner, captured_ms, boot_id, boot_ns,
             clock_synced, scan_type, quantity, gtin, ndc10, lot, serial, expiry, symbology,
             content_key, key_prefix)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
    )?
    .execute(params![
        e.scan_uuid,
        e.gateway,
        e.scanner,
        e.captured_ms,
        e.boot_id,
        e.boot_ns,
        e.clock_synced,
        e.scan_type,
        e.quantity,
        e.gtin,
        e.ndc10,
        e.lot,
        e.serial,
        e.expiry,
        e.symbology,
        e.content_key,
        key_prefix
    ])?;
    Ok(())
}

/// Entries captured at or after `since_ms` (all when `None`), in ledger order;
/// `f` is called for each so an export streams instead of loading everything.
pub fn for_each(
    store: &Store,
    since_ms: Option<i64>,
    mut f: impl FnMut(LedgerEntry) -> std::io::Result<()>,
) -> Result<(), StoreError> {
    let mut q = store
        .conn
        .prepare(
            "SELECT seq, scan_uuid, gateway, scanner, captured_ms, clock_synced, scan_type,
                    quantity, gtin, ndc10, lot, serial, expiry, symbology, content_key
             FROM ledger WHERE captured_ms >= ?1 ORDER BY seq",
        )
        .map_err(|e| store.err_at(e))?;
    let mut rows = q
        .query([since_ms.unwrap_or(i64::MIN)])
        .map_err(|e| store.err_at(e))?;
    while let Some(r) = rows.next().map_err(|e| store.err_at(e))? {
        let entry = (|| {
            Ok::<_, rusqlite::Error>(LedgerEntry {
                seq: r.get(0)?,
                scan_uuid: r.get(1)?,
                gateway: r.get(2)?,
                scanner: r.get(3)?,
                captured_at: rfc3339_ms(r.get(4)?),
                clock_synced: r.get(5)?,
                scan_type: r.get(6)?,
                quantity: r.get(7)?,
                gtin: r.get(8)?,
                ndc10: r.get(9)?,
                lot: r.get(10)?,
                serial: r.get(11)?,
                expiry: r.get(12)?,
                symbology: r.get(13)?,
                content_key: r.get(14)?,
            })
        })()
        .map_err(|e| store.err_at(e))?;
        if f(entry).is_err() {
            // The reader went away (e.g. `| head`): stop quietly.
            break;
        }
    }
    Ok(())
}
