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

/// Append the outbox row `scan_seq` to the ledger; call it inside the
/// decision's transaction. (A read and a single-row `INSERT … VALUES` rather
/// than `INSERT … SELECT`: SQLite gives a possibly multi-row statement its own
/// statement journal, which cost ~8 % of the gate's time.)
pub(crate) fn append(
    tx: &Connection,
    scan_seq: i64,
    gateway: &str,
    key_prefix: i64,
) -> rusqlite::Result<()> {
    let mut read = tx.prepare_cached(
        "SELECT scan_uuid, scanner, captured_ms, boot_id, boot_ns, clock_synced, scan_type,
             quantity, gtin, ndc10, lot, serial, expiry, symbology, content_key
         FROM scans WHERE seq = ?1",
    )?;
    let mut insert = tx.prepare_cached(
        "INSERT INTO ledger (scan_uuid, gateway, scanner, captured_ms, boot_id, boot_ns,
             clock_synced, scan_type, quantity, gtin, ndc10, lot, serial, expiry, symbology,
             content_key, key_prefix)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
    )?;
    let mut rows = read.query([scan_seq])?;
    let r = rows.next()?.ok_or(rusqlite::Error::QueryReturnedNoRows)?;
    use rusqlite::types::ToSqlOutput;
    let v = |i: usize| r.get_ref(i).map(ToSqlOutput::Borrowed);
    insert.execute(params![
        v(0)?,
        gateway,
        v(1)?,
        v(2)?,
        v(3)?,
        v(4)?,
        v(5)?,
        v(6)?,
        v(7)?,
        v(8)?,
        v(9)?,
        v(10)?,
        v(11)?,
        v(12)?,
        v(13)?,
        v(14)?,
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
