//! Outbox: the write-ahead record of every scan (invariant 1).
//!
//! A scan is inserted here, in a committed `BEGIN IMMEDIATE` transaction with
//! `synchronous=FULL`, before the gate decides it and before the scanner gets
//! its ACK. Many scans share one transaction (group commit, one fsync).
//! Inserting is idempotent by scan UUID (invariant 5).

use crate::capture::Scan;
use crate::gate::content_key;
use crate::store::{Store, StoreError};
use rusqlite::{Transaction, params};

/// Counts by state and the age of the oldest undecided scan.
#[derive(Debug, Clone, serde::Serialize)]
pub struct OutboxStatus {
    /// Scans waiting for their first decision.
    pub pending: i64,
    /// Scans waiting for exact knowledge (facility store unreachable).
    pub unresolved: i64,
    /// Scans that added a ledger entry.
    pub committed: i64,
    /// Echoes of a committed scan.
    pub suppressed: i64,
    /// Scans that failed validation.
    pub rejected: i64,
    /// Capture time (Unix ms) of the oldest pending or unresolved scan.
    pub oldest_open_ms: Option<i64>,
    /// What the facility claimer last knew of the facility store (`None`
    /// before its first answer or failure, and without `[redis]`).
    pub facility: Option<FacilityState>,
}

/// `meta` key of [`FacilityState`].
const FACILITY_STATE: &str = "facility_state";

/// Whether the facility store answered the claimer's last claims, since
/// when, and if not why: for `scangate outbox status`, so a technician sees
/// the reason without reading the logs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FacilityState {
    /// Claims are answered.
    pub answering: bool,
    /// Since when (Unix ms, wall clock).
    pub since_ms: i64,
    /// Why not, while not answering.
    pub reason: Option<String>,
}

impl OutboxStatus {
    /// Every scan in the outbox, whatever its state.
    pub fn total(&self) -> i64 {
        self.pending + self.unresolved + self.committed + self.suppressed + self.rejected
    }
}

impl Store {
    /// Make scans durable in their own transaction. Returns, per scan,
    /// whether it was new (`false`: this UUID was already in the outbox, the
    /// first copy stands).
    pub fn admit(&mut self, facility: &str, scans: &[Scan]) -> Result<Vec<bool>, StoreError> {
        let w = self.write()?;
        let fresh = insert(&w.tx, facility, scans).map_err(|e| w.err(e))?;
        w.commit()?;
        Ok(fresh)
    }

    /// Whether any scan waits for its first decision (cheap: partial index).
    pub fn has_pending(&self) -> Result<bool, StoreError> {
        self.conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM scans WHERE state = 'pending')",
                [],
                |r| r.get(0),
            )
            .map_err(|e| self.err_at(e))
    }

    /// The scans still waiting for a decision (`pending` and `unresolved`)
    /// and the oldest one's capture time: two partial-index reads, cheap
    /// enough to log on every retry of an outage.
    pub fn backlog(&self) -> Result<(i64, Option<i64>), StoreError> {
        // Literal states: SQLite uses a partial index only for the exact form.
        let waiting = self
            .conn
            .query_row(
                "SELECT (SELECT count(*) FROM scans WHERE state = 'pending')
                      + (SELECT count(*) FROM scans WHERE state = 'unresolved')",
                [],
                |r| r.get(0),
            )
            .map_err(|e| self.err_at(e))?;
        Ok((waiting, self.oldest_open_ms()?))
    }

    fn oldest_open_ms(&self) -> Result<Option<i64>, StoreError> {
        self.conn
            .query_row(
                "SELECT min(m) FROM (
                     SELECT min(captured_ms) AS m FROM scans WHERE state = 'pending'
                     UNION ALL
                     SELECT min(captured_ms) FROM scans WHERE state = 'unresolved')",
                [],
                |r| r.get(0),
            )
            .map_err(|e| self.err_at(e))
    }

    /// Counts by state and the oldest open scan.
    pub fn outbox_status(&self) -> Result<OutboxStatus, StoreError> {
        let mut st = OutboxStatus {
            pending: 0,
            unresolved: 0,
            committed: 0,
            suppressed: 0,
            rejected: 0,
            oldest_open_ms: None,
            facility: None,
        };
        let mut q = self
            .conn
            .prepare("SELECT state, count(*) FROM scans GROUP BY state")
            .map_err(|e| self.err_at(e))?;
        let rows = q
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
            .map_err(|e| self.err_at(e))?;
        for row in rows {
            let (state, n) = row.map_err(|e| self.err_at(e))?;
            match state.as_str() {
                "pending" => st.pending = n,
                "unresolved" => st.unresolved = n,
                "committed" => st.committed = n,
                "suppressed" => st.suppressed = n,
                "rejected" => st.rejected = n,
                _ => {}
            }
        }
        st.oldest_open_ms = self.oldest_open_ms()?;
        st.facility = self
            .meta(FACILITY_STATE)?
            .and_then(|v| serde_json::from_str(&v).ok());
        Ok(st)
    }

    /// Record what the facility claimer now knows of the facility store
    /// (its own small transaction; only on a change).
    pub fn set_facility_state(&mut self, state: &FacilityState) -> Result<(), StoreError> {
        let value = serde_json::to_string(state).expect("the state serialises");
        let w = self.write()?;
        crate::store::put_meta(&w.tx, FACILITY_STATE, &value).map_err(|e| w.err(e))?;
        w.commit()
    }
}

impl Store {
    /// Scans waiting for the facility store (cheap: partial index).
    pub fn unresolved(&self) -> Result<i64, StoreError> {
        self.conn
            .query_row(
                "SELECT count(*) FROM scans WHERE state = 'unresolved'",
                [],
                |r| r.get(0),
            )
            .map_err(|e| self.err_at(e))
    }

    /// Make `unresolved` scans `pending` again, so that the embedded store
    /// decides them (`scangate outbox decide-locally`, for a gateway whose
    /// facility store is gone for good). The embedded gate then decides
    /// them in capture order and audits each decision. Returns how many
    /// there were.
    pub fn reopen_unresolved(&mut self) -> Result<u64, StoreError> {
        let w = self.write()?;
        let n =
            w.tx.execute(
                "UPDATE scans SET state = 'pending' WHERE state = 'unresolved'",
                [],
            )
            .map_err(|e| w.err(e))?;
        w.commit()?;
        Ok(n as u64)
    }
}

/// Rows looked at per transaction when raw bytes are cleared, so the
/// writers' turn is held for a few milliseconds at a time.
const CLEAR_CHUNK: i64 = 500;

/// `meta` key: every outbox row up to this `seq` has had its raw bytes
/// cleared (the sweep resumes after it).
const RAW_CLEARED_THROUGH: &str = "raw_cleared_through";

/// What one [`Store::clear_raw`] sweep did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Sweep {
    /// Rows whose raw bytes were overwritten.
    pub cleared: u64,
    /// The row the sweep stopped at because it is still open: its bytes
    /// and those of every later row wait until it is decided.
    pub held_by: Option<Held>,
    /// `keep_going` said stop before the sweep was done.
    pub interrupted: bool,
}

/// An open outbox row that holds a raw-bytes sweep back.
#[derive(Debug, PartialEq, Eq)]
pub struct Held {
    /// Its outbox position.
    pub seq: i64,
    /// `pending` or `unresolved`.
    pub state: String,
    /// Its capture time, Unix ms.
    pub captured_ms: i64,
}

/// Where one chunk of a sweep ended.
enum ChunkEnd {
    /// A full chunk was cleared: go on.
    More,
    /// No more rows, or one decided too recently.
    Done,
    /// An open row.
    HeldBy(Held),
}

impl Store {
    /// Overwrite the raw bytes of scans decided before `before_ms` (Unix
    /// ms): what the scanner sent may be a patient's label scanned by
    /// mistake, and nothing reads it once the scan is decided (the decoded
    /// fields, the audit record's `raw_len` and the ledger stay). Rows are
    /// swept in outbox order, [`CLEAR_CHUNK`] per write turn, asking
    /// `keep_going` between chunks; the sweep stops at the first row that is
    /// still open or was decided later, so no row is cleared early, and
    /// resumes there next time. Every writing connection has
    /// `secure_delete` on, so the old bytes are overwritten in the database
    /// file; the WAL still holds old page images of the cleared rows until
    /// [`Store::truncate_wal`] (the sweeper calls it after a sweep).
    pub fn clear_raw(
        &mut self,
        before_ms: i64,
        keep_going: &mut dyn FnMut() -> bool,
    ) -> Result<Sweep, StoreError> {
        let mut sweep = Sweep::default();
        loop {
            if !keep_going() {
                sweep.interrupted = true;
                break;
            }
            let w = self.write()?;
            let (n, end) = clear_chunk(&w.tx, before_ms).map_err(|e| w.err(e))?;
            w.commit()?;
            sweep.cleared += n;
            match end {
                ChunkEnd::More => {}
                ChunkEnd::Done => break,
                ChunkEnd::HeldBy(held) => {
                    sweep.held_by = Some(held);
                    break;
                }
            }
        }
        Ok(sweep)
    }
}

/// One chunk of [`Store::clear_raw`]: rows cleared, and where it ended.
fn clear_chunk(tx: &Transaction<'_>, before_ms: i64) -> rusqlite::Result<(u64, ChunkEnd)> {
    use rusqlite::OptionalExtension;
    let mut through: i64 = tx
        .query_row(
            "SELECT CAST(value AS INTEGER) FROM meta WHERE key = ?1",
            [RAW_CLEARED_THROUGH],
            |r| r.get(0),
        )
        .optional()?
        .unwrap_or(0);
    let rows: Vec<(i64, Option<i64>, String, i64)> = tx
        .prepare_cached(
            "SELECT seq, decided_ms, state, captured_ms FROM scans WHERE seq > ?1 ORDER BY seq LIMIT ?2",
        )?
        .query_map(params![through, CLEAR_CHUNK], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut clear = tx.prepare_cached("UPDATE scans SET raw = x'' WHERE seq = ?1")?;
    let mut cleared = 0;
    let mut end = if (rows.len() as i64) < CLEAR_CHUNK {
        ChunkEnd::Done
    } else {
        ChunkEnd::More
    };
    for (seq, decided_ms, state, captured_ms) in rows {
        // Still open, or decided too recently: stop here.
        if decided_ms.is_none_or(|d| d >= before_ms) {
            end = match decided_ms {
                None => ChunkEnd::HeldBy(Held {
                    seq,
                    state,
                    captured_ms,
                }),
                Some(_) => ChunkEnd::Done,
            };
            break;
        }
        clear.execute([seq])?;
        through = seq;
        cleared += 1;
    }
    crate::store::put_meta(tx, RAW_CLEARED_THROUGH, &through.to_string())?;
    Ok((cleared, end))
}

/// Insert scans as `pending` inside `tx` (idempotent by UUID). Returns, per
/// scan, whether its row is new.
pub(crate) fn insert(
    tx: &Transaction<'_>,
    facility: &str,
    scans: &[Scan],
) -> rusqlite::Result<Vec<bool>> {
    let mut insert = tx.prepare_cached(
        "INSERT OR IGNORE INTO scans (scan_uuid, scanner, scan_type, quantity,
            captured_ms, boot_id, boot_ns, clock_synced, raw, symbology, gtin,
            ndc10, lot, serial, expiry, content_key, reject_reason)
         VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17)",
    )?;
    let mut fresh = Vec::with_capacity(scans.len());
    for scan in scans {
        let (symbology, product, key, reason) = match &scan.decoded {
            Ok(d) if d.product.is_dispensable() => (
                Some(d.aim.as_str()),
                Some(&d.product),
                Some(content_key(facility, &scan.profile, &d.product)),
                None,
            ),
            Ok(d) => (
                Some(d.aim.as_str()),
                None,
                None,
                Some("not a dispensable product: the barcode carries no GTIN".to_string()),
            ),
            Err(e) => (None, None, None, Some(e.to_string())),
        };
        let n = insert.execute(params![
            scan.uuid.to_string(),
            scan.profile.scanner,
            scan.profile.scan_type.as_str(),
            scan.profile.quantity,
            scan.time.utc_ms,
            scan.time.boot_id,
            scan.time.boot_ns,
            scan.time.synced,
            scan.raw,
            symbology,
            product.and_then(|p| p.gtin.as_deref()),
            product.and_then(|p| p.ndc10.as_deref()),
            product.and_then(|p| p.lot.as_deref()),
            product.and_then(|p| p.serial.as_deref()),
            product.and_then(|p| p.expiry.map(|d| d.format("%Y-%m-%d").to_string())),
            key,
            reason,
        ])?;
        fresh.push(n == 1);
    }
    Ok(fresh)
}
