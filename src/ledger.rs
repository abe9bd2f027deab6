//! Ledger (embedded): one entry per committed scan, appended in the same
//! transaction as the decision, and exported as JSON lines for the facility's
//! inventory system. The owner of the `ledger` table, and so of the exact
//! lookup the gate asks for a committed twin ([`find_twin`]).

use crate::capture::clock::rfc3339_ms;
use crate::model::{AlertFound, Findings};
use crate::outbox::ScanRow;
use crate::store::packed::{Unpacked, packed};
use crate::store::{Store, StoreError};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, params};
use serde::Serialize;

pub mod cursor;
pub mod epcis;

/// One ledger entry, with the field names the facility stream uses too
/// (docs/integrator.md).
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
    /// The item's DEA schedule (`CI` … `CV`) as the product
    /// data listed it at the commit; absent for an item not listed as
    /// controlled, without product data, and on entries committed before
    /// schedules were recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dea_schedule: Option<String>,
    /// What the checks at the counter found (most urgent first: what the
    /// scanner was told); absent when nothing was.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alerts: Vec<AlertFound>,
}

/// Appends the ledger entries of one transaction's commits through one
/// prepared statement (looked up in rusqlite's statement cache once, not
/// per scan).
pub struct Appender<'t> {
    tx: &'t Connection,
    insert: Option<rusqlite::CachedStatement<'t>>,
}

impl<'t> Appender<'t> {
    /// Appends to the ledger inside `tx`.
    pub fn new(tx: &'t Connection) -> Appender<'t> {
        Appender { tx, insert: None }
    }

    /// Append the ledger entry of committed scan `row` of `gateway`, in the
    /// decision's transaction. (The caller already holds the row's fields,
    /// so this is one single-row `INSERT … VALUES` — no read, and no
    /// statement journal as `INSERT … SELECT` had.) Returns the entry's
    /// [`entry_hash`], for its commit's audit record. `key` is the row's
    /// content key as bytes (decoded once by the caller).
    /// `findings`: what the checks at the counter found, kept with it.
    pub fn append(
        &mut self,
        row: &ScanRow,
        key: &[u8; 32],
        gateway: &str,
        findings: Option<&Findings>,
    ) -> rusqlite::Result<String> {
        let tx = self.tx;
        let insert = crate::store::held(
            &mut self.insert,
            tx,
            "INSERT INTO ledger (scan_uuid, gateway, scanner, captured_ms, boot_id, boot_ns,
                 clock_synced, scan_type, quantity, gtin, ndc10, lot, serial, expiry, symbology,
                 content_key, key_prefix, dea_schedule, alerts)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
                 ?18, ?19)",
        )?;
        let prefix = key_prefix(key);
        let key = row.content_key.as_deref().unwrap_or_default();
        let schedule = findings.and_then(|f| f.dea_schedule.as_deref());
        let alerts: &[AlertFound] = findings.map_or(&[], |f| &f.alerts);
        let alerts_json = (!alerts.is_empty())
            .then(|| serde_json::to_string(alerts).expect("alerts always serialise"));
        insert.execute(params![
            packed(&row.uuid),
            gateway,
            row.scanner,
            row.time.utc_ms,
            packed(&row.time.boot_id),
            row.time.boot_ns,
            row.time.synced,
            row.scan_type,
            row.quantity,
            row.gtin,
            row.ndc10,
            row.lot,
            row.serial,
            row.expiry,
            row.symbology.as_deref().unwrap_or_default(),
            packed(key),
            prefix,
            schedule,
            alerts_json
        ])?;
        Ok(hash_json(&EntryLine {
            seq: tx.last_insert_rowid(),
            scan_uuid: &row.uuid,
            gateway,
            scanner: &row.scanner,
            captured_at: rfc3339_ms(row.time.utc_ms),
            clock_synced: row.time.synced,
            scan_type: &row.scan_type,
            quantity: row.quantity,
            gtin: row.gtin.as_deref(),
            ndc10: row.ndc10.as_deref(),
            lot: row.lot.as_deref(),
            serial: row.serial.as_deref(),
            expiry: row.expiry.as_deref(),
            symbology: row.symbology.as_deref().unwrap_or_default(),
            content_key: key,
            dea_schedule: schedule,
            alerts,
        }))
    }
}

/// A [`LedgerEntry`] borrowed from the row it is made of: the same fields
/// in the same order, so the same JSON line (a unit test holds them
/// equal), hashed at commit without copying the row's strings.
#[derive(Serialize)]
struct EntryLine<'a> {
    seq: i64,
    scan_uuid: &'a str,
    gateway: &'a str,
    scanner: &'a str,
    captured_at: String,
    clock_synced: bool,
    scan_type: &'a str,
    quantity: i64,
    gtin: Option<&'a str>,
    ndc10: Option<&'a str>,
    lot: Option<&'a str>,
    serial: Option<&'a str>,
    expiry: Option<&'a str>,
    symbology: &'a str,
    content_key: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    dea_schedule: Option<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    alerts: &'a [AlertFound],
}

/// The hash of an entry as `ledger export` prints it: SHA-256 (lowercase
/// hex) of its JSON line. Kept in its commit's audit record
/// (`ledger_hash`), so every byte the inventory system reads is under the
/// chain (`audit verify` checks each entry against it).
pub fn entry_hash(entry: &LedgerEntry) -> String {
    hash_json(entry)
}

/// SHA-256 (lowercase hex) of `value`'s JSON, written into a buffer and
/// hashed in one call (serde writes a line in ~60 pieces; hashing each as
/// it comes cost more than the buffer).
fn hash_json(value: &impl Serialize) -> String {
    use sha2::{Digest, Sha256};
    let mut line = Vec::with_capacity(512);
    serde_json::to_writer(&mut line, value).expect("ledger entries always serialise");
    crate::capture::hex32(&Sha256::digest(&line).into())
}

/// The exact lookup: the committed scan with content key `key` captured
/// nearest to `row` within ±`window` (of two equally near, the earlier) —
/// on the boot clock for scans of the same boot (`ledger_boot`), on the
/// wall clock for scans of other boots (`ledger_wall`). The facility's
/// claim script names the same one. Each index is led by a time bucket (migration 3), so
/// the lookup seeks every bucket the window touches: one or two for a
/// window of seconds. A wall clock stepped within the boot does not widen
/// anything: same-boot twins never use it.
pub fn find_twin(
    tx: &Connection,
    (key, bytes): (&str, &[u8; 32]),
    row: &ScanRow,
    window: crate::model::EchoWindow,
) -> rusqlite::Result<Option<String>> {
    let w = window.ms();
    let prefix = key_prefix(bytes);
    let time = &row.time;
    // (distance in ns, captured_ms, seq, scan_uuid) of the nearest twin
    // found: by the boot clock within the boot, else by the wall clock.
    let mut best: Option<(i64, i64, i64, String)> = None;
    let mut keep = |r: &rusqlite::Row<'_>, distance_ns: i64| -> rusqlite::Result<()> {
        let found = (
            distance_ns,
            r.get(0)?,
            r.get(1)?,
            r.get::<_, Unpacked>(2)?.0,
        );
        if best
            .as_ref()
            .is_none_or(|b| (found.0, found.1, found.2) < (b.0, b.1, b.2))
        {
            best = Some(found);
        }
        Ok(())
    };
    let (lo, hi) = (time.boot_ns - w * 1_000_000, time.boot_ns + w * 1_000_000);
    let mut q = tx.prepare_cached(
        "SELECT captured_ms, seq, scan_uuid, boot_ns FROM ledger
         WHERE boot_id = ?1 AND boot_ns >> 33 = ?2 AND key_prefix = ?3
           AND boot_ns BETWEEN ?4 AND ?5 AND content_key = ?6",
    )?;
    let (boot, key) = (packed(&time.boot_id), packed(key));
    for bucket in (lo >> 33)..=(hi >> 33) {
        let mut rows = q.query(params![boot, bucket, prefix, lo, hi, key])?;
        while let Some(r) = rows.next()? {
            keep(r, (r.get::<_, i64>(3)? - time.boot_ns).abs())?;
        }
    }
    let (lo, hi) = (time.utc_ms - w, time.utc_ms + w);
    let mut q = tx.prepare_cached(
        "SELECT captured_ms, seq, scan_uuid FROM ledger
         WHERE captured_ms >> 13 = ?1 AND key_prefix = ?2
           AND captured_ms BETWEEN ?3 AND ?4 AND content_key = ?5 AND boot_id <> ?6",
    )?;
    for bucket in (lo >> 13)..=(hi >> 13) {
        let mut rows = q.query(params![bucket, prefix, lo, hi, key, boot])?;
        while let Some(r) = rows.next()? {
            keep(r, (r.get::<_, i64>(0)? - time.utc_ms).abs() * 1_000_000)?;
        }
    }
    Ok(best.map(|(_, _, _, uuid)| uuid))
}

/// Call `f` with the content key of every entry captured at or after
/// `since_ms` (the gate rebuilds its Bloom filter from them at start), as
/// its 32 bytes (zeros for a key that is not 64 hex digits, as
/// [`crate::capture::key_bytes`] gives).
pub fn keys_since(
    conn: &Connection,
    since_ms: i64,
    mut f: impl FnMut(&[u8; 32]),
) -> rusqlite::Result<()> {
    // `ledger_wall`'s first column is the time's 8 s bucket: its range
    // finds the entries without an index of their own (migration 11).
    let mut q = conn.prepare(
        "SELECT content_key FROM ledger WHERE captured_ms >> 13 >= ?1 >> 13 AND captured_ms >= ?1",
    )?;
    let mut rows = q.query([since_ms])?;
    while let Some(row) = rows.next()? {
        match row.get_ref(0)? {
            ValueRef::Blob(b) if b.len() == 32 => f(b.try_into().expect("32 bytes")),
            v => f(&crate::capture::key_bytes(v.as_str()?)),
        }
    }
    Ok(())
}

/// The latest-decided entry (by ledger position) captured at or after
/// `since_ms`, among the last few: the marker a facility claim checks
/// (`None` if the last entries are all older; the next round looks again).
pub fn latest_since(conn: &Connection, since_ms: i64) -> rusqlite::Result<Option<String>> {
    let mut q =
        conn.prepare_cached("SELECT scan_uuid, captured_ms FROM ledger ORDER BY seq DESC LIMIT 8")?;
    let mut rows = q.query([])?;
    while let Some(r) = rows.next()? {
        if r.get::<_, i64>(1)? >= since_ms {
            return Ok(Some(r.get::<_, Unpacked>(0)?.0));
        }
    }
    Ok(None)
}

/// The scans of the entries captured at or after `since_ms`, in ledger
/// order (the order they were decided), each with its entry's capture time
/// and `clock_synced`.
pub fn scans_since(conn: &Connection, since_ms: i64) -> rusqlite::Result<Vec<(String, i64, bool)>> {
    let mut q = conn.prepare(
        "SELECT scan_uuid, captured_ms, clock_synced FROM ledger
         WHERE captured_ms >= ?1 ORDER BY seq",
    )?;
    q.query_map([since_ms], scan_row)?.collect()
}

/// The scan of the entry of committed scan `scan_uuid`, as
/// [`scans_since`] gives each.
pub fn scan_of(
    conn: &Connection,
    scan_uuid: &str,
) -> rusqlite::Result<Option<(String, i64, bool)>> {
    use rusqlite::OptionalExtension;
    conn.prepare_cached(
        "SELECT scan_uuid, captured_ms, clock_synced FROM ledger WHERE scan_uuid = ?1",
    )?
    .query_row([packed(scan_uuid)], scan_row)
    .optional()
}

/// `(scan_uuid, captured_ms, clock_synced)` of a row.
fn scan_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(String, i64, bool)> {
    Ok((r.get::<_, Unpacked>(0)?.0, r.get(1)?, r.get(2)?))
}

/// The position of scan `scan_uuid`'s entry in this ledger, if it has one.
pub fn seq_of(conn: &Connection, scan_uuid: &str) -> rusqlite::Result<Option<i64>> {
    use rusqlite::OptionalExtension;
    conn.prepare_cached("SELECT seq FROM ledger WHERE scan_uuid = ?1")?
        .query_row([packed(scan_uuid)], |r| r.get(0))
        .optional()
}

/// Whether scan `scan_uuid` is in this ledger (committed by this gateway).
pub fn has_entry(conn: &Connection, scan_uuid: &str) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM ledger WHERE scan_uuid = ?1)")?
        .query_row([packed(scan_uuid)], |r| r.get(0))
}

/// The ledger's index column for a content key: its first 4 bytes, as a
/// signed integer (SQLite stores it in 4 bytes; within one ~8 s bucket
/// of the exact indexes a wrong match is rare, and the query compares the
/// whole key). Migration 8 made it so (it was the first 8).
fn key_prefix(key: &[u8; 32]) -> i64 {
    i64::from(i32::from_be_bytes(key[..4].try_into().expect("4 bytes")))
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
        .prepare(&format!(
            "SELECT {ENTRY_COLUMNS} FROM ledger WHERE captured_ms >= ?1 ORDER BY seq"
        ))
        .map_err(|e| store.err_at(e))?;
    let mut rows = q
        .query([since_ms.unwrap_or(i64::MIN)])
        .map_err(|e| store.err_at(e))?;
    while let Some(r) = rows.next().map_err(|e| store.err_at(e))? {
        let entry = entry_of(r).map_err(|e| store.err_at(e))?;
        if f(entry).is_err() {
            // The reader went away (e.g. `| head`): stop quietly.
            break;
        }
    }
    Ok(())
}

/// The columns [`entry_of`] reads, in its order.
const ENTRY_COLUMNS: &str =
    "seq, scan_uuid, gateway, scanner, captured_ms, clock_synced, scan_type,
    quantity, gtin, ndc10, lot, serial, expiry, symbology, content_key, dea_schedule, alerts";

/// A ledger entry from a row of [`ENTRY_COLUMNS`].
fn entry_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<LedgerEntry> {
    Ok(LedgerEntry {
        seq: r.get(0)?,
        scan_uuid: r.get::<_, Unpacked>(1)?.0,
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
        content_key: r.get::<_, Unpacked>(14)?.0,
        dea_schedule: r.get(15)?,
        alerts: match r.get_ref(16)? {
            ValueRef::Null => Vec::new(),
            v => serde_json::from_slice(v.as_bytes()?).map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(16, v.data_type(), e.into())
            })?,
        },
    })
}

/// The entry of committed scan `scan_uuid`, as `ledger export` prints it
/// (for an archive, beside its commit record).
pub fn entry_for_scan(conn: &Connection, scan_uuid: &str) -> rusqlite::Result<Option<LedgerEntry>> {
    use rusqlite::OptionalExtension;
    conn.prepare_cached(&format!(
        "SELECT {ENTRY_COLUMNS} FROM ledger WHERE scan_uuid = ?1"
    ))?
    .query_row([packed(scan_uuid)], entry_of)
    .optional()
}

/// A committed `receive` read of a serialised item, as its ledger entry
/// has it ([`receipts_since`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptEntry {
    /// The read.
    pub scan_uuid: String,
    /// Its capture time (Unix ms; facility time with a facility store).
    pub captured_ms: i64,
    /// Its scanner.
    pub scanner: String,
    /// GTIN-14.
    pub gtin: String,
    /// Serial number.
    pub serial: String,
}

/// The committed `receive` reads of serialised items captured at or after
/// `since_ms` that were first receipts (no `suspect` alert), in ledger
/// order: the receipts this gateway re-publishes to a facility store that
/// lost data. (A scan of the ledger: rare, and no index is kept for it.)
pub fn receipts_since(conn: &Connection, since_ms: i64) -> rusqlite::Result<Vec<ReceiptEntry>> {
    conn.prepare(
        r#"SELECT scan_uuid, captured_ms, scanner, gtin, serial FROM ledger
           WHERE captured_ms >= ?1 AND scan_type = 'receive'
             AND gtin IS NOT NULL AND serial IS NOT NULL
             AND (alerts IS NULL OR instr(alerts, '"kind":"suspect"') = 0)
           ORDER BY seq"#,
    )?
    .query_map([since_ms], |r| {
        Ok(ReceiptEntry {
            scan_uuid: r.get::<_, Unpacked>(0)?.0,
            captured_ms: r.get(1)?,
            scanner: r.get(2)?,
            gtin: r.get(3)?,
            serial: r.get(4)?,
        })
    })?
    .collect()
}

/// Remove the entry of scan `scan_uuid` (pruning: its commit record is
/// archived and older than `[records] keep_days`, and the entry is past
/// the dedup horizon, so the gate no longer looks at it). True if there was one.
pub fn prune_entry(tx: &Connection, scan_uuid: &str) -> rusqlite::Result<bool> {
    Ok(tx
        .prepare_cached("DELETE FROM ledger WHERE scan_uuid = ?1")?
        .execute([packed(scan_uuid)])?
        > 0)
}

#[cfg(test)]
mod tests {
    use super::{EntryLine, LedgerEntry};
    use crate::model::AlertFound;
    use crate::store::Store;

    /// The entry hashed at commit is the one `ledger export` prints, byte
    /// for byte, with and without the optional fields.
    #[test]
    fn the_borrowed_line_is_the_exported_entry() {
        for some in [true, false] {
            let opt = |v: &str| some.then(|| v.to_string());
            let e = LedgerEntry {
                seq: 7,
                scan_uuid: "019ae4c4-0d52-7c41-9f8e-2f0b7d1e6a30".into(),
                gateway: "gw \"1\"".into(),
                scanner: "counter-1".into(),
                captured_at: "2026-12-02T16:40:44.896Z".into(),
                clock_synced: some,
                scan_type: "dispense".into(),
                quantity: 3,
                gtin: opt("00307773105025"),
                ndc10: opt("0777310502"),
                lot: opt("LOT\u{1d}1"),
                serial: opt("SN1"),
                expiry: opt("2028-12-31"),
                symbology: "]d2".into(),
                content_key: "e9ed".into(),
                dea_schedule: opt("CII"),
                alerts: if some {
                    vec![AlertFound {
                        recall_number: opt("D-0001-2026"),
                        recall_class: opt("Class I"),
                        recall_lot: opt("lot"),
                        ..AlertFound::of(crate::model::Alert::Recalled)
                    }]
                } else {
                    Vec::new()
                },
            };
            let line = EntryLine {
                seq: e.seq,
                scan_uuid: &e.scan_uuid,
                gateway: &e.gateway,
                scanner: &e.scanner,
                captured_at: e.captured_at.clone(),
                clock_synced: e.clock_synced,
                scan_type: &e.scan_type,
                quantity: e.quantity,
                gtin: e.gtin.as_deref(),
                ndc10: e.ndc10.as_deref(),
                lot: e.lot.as_deref(),
                serial: e.serial.as_deref(),
                expiry: e.expiry.as_deref(),
                symbology: &e.symbology,
                content_key: &e.content_key,
                dea_schedule: e.dea_schedule.as_deref(),
                alerts: &e.alerts,
            };
            assert_eq!(
                serde_json::to_string(&line).unwrap(),
                serde_json::to_string(&e).unwrap()
            );
            assert_eq!(super::hash_json(&line), super::entry_hash(&e));
        }
    }

    /// The exact lookups must seek the bucketed indexes (a query that does
    /// not repeat the index expression exactly would scan the ledger).
    #[test]
    fn exact_lookups_seek_the_bucketed_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let plan = |sql: &str| crate::store::query_plan(&store.conn, sql);
        let boot = plan(
            "SELECT captured_ms, seq, scan_uuid FROM ledger
             WHERE boot_id = 'b' AND boot_ns >> 33 = 1 AND key_prefix = 2
               AND boot_ns BETWEEN 3 AND 4 AND content_key = 'k'",
        );
        assert!(
            boot.contains("USING INDEX ledger_boot (boot_id=? AND <expr>=? AND key_prefix=?"),
            "{boot}"
        );
        let wall = plan(
            "SELECT captured_ms, seq, scan_uuid FROM ledger
             WHERE captured_ms >> 13 = 1 AND key_prefix = 2
               AND captured_ms BETWEEN 3 AND 4 AND content_key = 'k' AND boot_id <> 'b'",
        );
        assert!(
            wall.contains("USING INDEX ledger_wall (<expr>=? AND key_prefix=?"),
            "{wall}"
        );
    }
}
