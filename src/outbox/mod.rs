//! Outbox: the write-ahead record of every scan (invariant 1), and the
//! owner of the `scans` table — every statement on it is in this module.
//!
//! A scan is inserted here, in a committed `BEGIN IMMEDIATE` transaction with
//! `synchronous=FULL`, before the gate decides it and before the scanner gets
//! its ACK. Many scans share one transaction (group commit, one fsync).
//! Inserting is idempotent by scan UUID (invariant 5). A row's life is its
//! [`ScanState`]: `pending` → `committed` | `suppressed` | `rejected`, or,
//! with a facility store that does not answer, `unresolved` first. The gate
//! decides; the verdict is written back here ([`Rows::set_verdict`]) in the
//! decision's own transaction.
//!
//! - [`open`]: the open scans in capture order, and the probes the
//!   claimer's lanes make of each other's;
//! - [`admitted`]: the rows just committed, handed in memory to the
//!   claimer's live lane (it need not read them back);
//! - [`raw`]: overwriting decided scans' raw bytes after `keep_raw_hours`.

pub(crate) mod admitted;
pub mod echoes;
pub(crate) mod open;
pub(crate) mod raw;

use crate::capture::{CaptureTime, Scan};
use crate::events::Event as _;
use crate::model::{EchoWindow, ScanState};
use crate::store::packed::{Unpacked, packed};
use crate::store::{Store, StoreError};
use rusqlite::{Connection, OptionalExtension, params};

/// A scan as the outbox holds it, the one record of its columns (the raw
/// bytes only as their length): what the gate decides, the ledger entry's
/// fields, what a claim carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanRow {
    /// Outbox position.
    pub seq: i64,
    /// Where it is in its life.
    pub state: ScanState,
    /// Capture UUID.
    pub uuid: String,
    /// Scanner that read it.
    pub scanner: String,
    /// receive | dispense | waste | return | adjust.
    pub scan_type: String,
    /// Units.
    pub quantity: i64,
    /// When it was read (as stamped; a facility claim puts it on facility
    /// time in memory, `claimer::facility_time`).
    pub time: CaptureTime,
    /// Length of the raw frame (bytes cleared after `keep_raw_hours` keep it).
    pub raw_len: i64,
    /// AIM symbology identifier (absent when the frame did not decode).
    pub symbology: Option<String>,
    /// GTIN-14.
    pub gtin: Option<String>,
    /// NDC, 10 digits.
    pub ndc10: Option<String>,
    /// Batch / lot.
    pub lot: Option<String>,
    /// Serial number.
    pub serial: Option<String>,
    /// Expiry, YYYY-MM-DD.
    pub expiry: Option<String>,
    /// Content key (absent for a rejected scan).
    pub content_key: Option<String>,
    /// Why it is rejected (set at admission).
    pub reject_reason: Option<String>,
    /// Its own echo window (ms), narrower than the gateway's, fixed at the
    /// read ([`Scan::own_window`]); `None`: the gateway's.
    pub window: Option<EchoWindow>,
    /// The policy its scanner applied to a label without a serial
    /// (`window`, `double-fire`, `ask`); `None`: serialised or rejected.
    pub unserialised: Option<String>,
    /// Its scanner may have been resending the frame ([`Scan::resend`]).
    pub resend: bool,
    /// Declared by the operator with a control label (`repeat`,
    /// `quantity N`), and that control read's scan UUID.
    pub declared: Option<(String, String)>,
    /// A control label read: what it declares.
    pub control: Option<String>,
}

/// The columns a [`ScanRow`] is read from, in [`ScanRow::read`]'s order
/// (a macro, so statements can be `concat!`ed at compile time).
macro_rules! COLUMNS {
    () => {
        "seq, state, scan_uuid, scanner, captured_ms, boot_id, boot_ns, clock_synced,
         content_key, reject_reason, length(raw), scan_type, quantity, gtin, ndc10,
         lot, serial, expiry, symbology, window_ms, unserialised, resend,
         declared, declared_by, control"
    };
}
pub(crate) use COLUMNS;

impl ScanRow {
    /// A row selected with the columns of `COLUMNS!()`, in their order.
    pub fn read(r: &rusqlite::Row<'_>) -> rusqlite::Result<ScanRow> {
        Ok(ScanRow {
            seq: r.get(0)?,
            state: r.get(1)?,
            uuid: r.get::<_, Unpacked>(2)?.0,
            scanner: r.get(3)?,
            time: CaptureTime {
                utc_ms: r.get(4)?,
                boot_id: r.get::<_, Unpacked>(5)?.0,
                boot_ns: r.get(6)?,
                synced: r.get(7)?,
            },
            content_key: r.get::<_, Option<Unpacked>>(8)?.map(|k| k.0),
            reject_reason: r.get(9)?,
            raw_len: r.get(10)?,
            scan_type: r.get(11)?,
            quantity: r.get(12)?,
            gtin: r.get(13)?,
            ndc10: r.get(14)?,
            lot: r.get(15)?,
            serial: r.get(16)?,
            expiry: r.get(17)?,
            symbology: r.get(18)?,
            window: r.get::<_, Option<i64>>(19)?.map(EchoWindow::from_ms),
            unserialised: r.get(20)?,
            resend: r.get(21)?,
            declared: match (r.get(22)?, r.get::<_, Option<Unpacked>>(23)?) {
                (Some(what), Some(Unpacked(by))) => Some((what, by)),
                _ => None,
            },
            control: r.get(24)?,
        })
    }
}

/// Counts by state and the age of the oldest undecided scan.
#[derive(Debug, Clone, Default, serde::Serialize)]
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
    /// Control labels read (never picks).
    pub control: i64,
    /// Of the suppressed, the ambiguous: labels without a serial.
    pub ambiguous: i64,
    /// Capture time (Unix ms) of the oldest pending or unresolved scan.
    pub oldest_open_ms: Option<i64>,
}

/// Disk space as `outbox status` shows it (its `disk`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct DiskStatus {
    /// The state directory.
    pub state_dir: std::path::PathBuf,
    /// Free space, growth, days left.
    #[serde(flatten)]
    pub space: crate::store::space::Space,
    /// `[outbox] min_free_mb` in bytes.
    pub min_free_bytes: u64,
    /// Free space is below it: no scan is stored or acknowledged.
    pub below_floor: bool,
    /// The days-left warning (`[outbox] warn_days_left`), if due.
    pub warning: Option<String>,
}

impl OutboxStatus {
    /// Every scan in the outbox, whatever its state.
    pub fn total(&self) -> i64 {
        self.pending
            + self.unresolved
            + self.committed
            + self.suppressed
            + self.rejected
            + self.control
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

    /// [`Store::admit`], and in the same transaction the writes handed to
    /// this writer (`desk`: the facility claimer's verdicts): one commit,
    /// one fsync for both. A handed write that fails is undone alone and
    /// hears why; if the scans cannot be written, no handed write runs
    /// (they wait for the writer's next transaction). Once committed, the
    /// new rows go to `admitted` (the live lane's cache of them).
    pub fn admit_with(
        &mut self,
        facility: &str,
        scans: &[Scan],
        desk: &crate::store::handoff::Desk,
        admitted: &admitted::Admitted,
    ) -> Result<Vec<bool>, StoreError> {
        let w = self.write()?;
        let (fresh, rows) = insert_rows(&w.tx, facility, scans).map_err(|e| w.err(e))?;
        let mut handed = desk.run_on(&w);
        if let Some(lost) = handed.lost() {
            return Err(lost); // (the scans' rows went with it)
        }
        let committed = w.commit();
        handed.done(&committed);
        committed.map(|()| {
            admitted.hand(rows);
            fresh
        })
    }

    /// Make scans durable and decided in **one** transaction (one fsync):
    /// `write_and_decide` writes them into it with their decisions (the
    /// gate's `write_and_decide`), returning per scan whether it was new.
    /// Nothing outside the database sees a decision before the commit that
    /// also makes the scan durable. If it fails, the transaction is rolled
    /// back and the scans are made durable alone, as `pending` — a fault
    /// in deciding never costs a scan its durability; the failure is
    /// logged, and the second value is then that failure.
    #[allow(clippy::type_complexity)]
    pub fn admit_and<T>(
        &mut self,
        facility: &str,
        scans: &[Scan],
        write_and_decide: impl FnOnce(&Connection) -> rusqlite::Result<(Vec<bool>, T)>,
    ) -> Result<(Vec<bool>, Result<T, StoreError>), StoreError> {
        let failed = {
            let w = self.write()?;
            match write_and_decide(&w.tx) {
                Ok((fresh, decided)) => {
                    w.commit()?;
                    return Ok((fresh, Ok(decided)));
                }
                Err(e) => w.err(e), // the transaction rolls back here
            }
        };
        crate::events::DecidingFailed {
            error: &failed,
            then: crate::events::DecidingThen::StoredPending,
        }
        .emit();
        let fresh = self.admit(facility, scans)?;
        Ok((fresh, Err(failed)))
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

    /// The undecided scans by state (`pending`, `unresolved`) and the
    /// oldest one's capture time (Unix ms): partial-index reads only, cheap
    /// enough to sample every few seconds.
    pub fn undecided(&self) -> Result<(i64, i64, Option<i64>), StoreError> {
        let count = |sql: &str| {
            self.conn
                .query_row(sql, [], |r| r.get::<_, i64>(0))
                .map_err(|e| self.err_at(e))
        };
        let pending = count("SELECT count(*) FROM scans WHERE state = 'pending'")?;
        let unresolved = count("SELECT count(*) FROM scans WHERE state = 'unresolved'")?;
        Ok((pending, unresolved, self.oldest_open_ms()?))
    }

    /// Counts by state and the oldest open scan.
    pub fn outbox_status(&self) -> Result<OutboxStatus, StoreError> {
        let mut st = OutboxStatus::default();
        let mut q = self
            .conn
            .prepare("SELECT state, count(*) FROM scans GROUP BY state")
            .map_err(|e| self.err_at(e))?;
        let rows = q
            .query_map([], |r| Ok((r.get::<_, ScanState>(0)?, r.get::<_, i64>(1)?)))
            .map_err(|e| self.err_at(e))?;
        for row in rows {
            let (state, n) = row.map_err(|e| self.err_at(e))?;
            *match state {
                ScanState::Pending => &mut st.pending,
                ScanState::Unresolved => &mut st.unresolved,
                ScanState::Committed => &mut st.committed,
                ScanState::Suppressed => &mut st.suppressed,
                ScanState::Rejected => &mut st.rejected,
                ScanState::Control => &mut st.control,
            } = n;
        }
        st.ambiguous = self
            .conn
            .query_row("SELECT count(*) FROM scans WHERE ambiguous = 1", [], |r| {
                r.get(0)
            })
            .map_err(|e| self.err_at(e))?;
        st.oldest_open_ms = self.oldest_open_ms()?;
        Ok(st)
    }
}

/// One scanner's decided scans ([`Store::scanner_counts`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ScannerCounts {
    /// Committed: ledger entries.
    pub committed: i64,
    /// Echoes.
    pub suppressed: i64,
    /// Of them, ambiguous.
    pub ambiguous: i64,
    /// Control label reads.
    pub control: i64,
}

impl Store {
    /// Decided scans of `scanner` by outcome: reads the scanner's whole
    /// history (no index by scanner), for the demo and investigations.
    pub fn scanner_counts(&self, scanner: &str) -> Result<ScannerCounts, StoreError> {
        self.conn
            .query_row(
                "SELECT count(*) FILTER (WHERE state = 'committed'),
                        count(*) FILTER (WHERE state = 'suppressed'),
                        count(*) FILTER (WHERE ambiguous = 1),
                        count(*) FILTER (WHERE state = 'control')
                 FROM scans WHERE scanner = ?1",
                [scanner],
                |r| {
                    Ok(ScannerCounts {
                        committed: r.get(0)?,
                        suppressed: r.get(1)?,
                        ambiguous: r.get(2)?,
                        control: r.get(3)?,
                    })
                },
            )
            .map_err(|e| self.err_at(e))
    }

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

/// Insert scans as `pending` inside `tx` (idempotent by UUID). Returns, per
/// scan, whether its row is new.
pub fn insert(tx: &Connection, facility: &str, scans: &[Scan]) -> rusqlite::Result<Vec<bool>> {
    insert_rows(tx, facility, scans).map(|(fresh, _)| fresh)
}

/// [`insert`], and the new rows as the outbox would read them back (each
/// with its `seq`).
pub fn insert_rows(
    tx: &Connection,
    facility: &str,
    scans: &[Scan],
) -> rusqlite::Result<(Vec<bool>, Vec<ScanRow>)> {
    let mut fresh = Vec::with_capacity(scans.len());
    let mut rows = Vec::with_capacity(scans.len());
    let mut inserts = Rows::new(tx);
    for scan in scans {
        let mut row = ScanRow::of_scan(scan, facility);
        let seq = inserts.insert(&scan.raw, &row, None, None)?;
        fresh.push(seq.is_some());
        if let Some(seq) = seq {
            row.seq = seq;
            rows.push(row);
        }
    }
    Ok((fresh, rows))
}

impl ScanRow {
    /// The row `scan` becomes in the outbox, made in memory exactly as
    /// [`ScanRow::read`] would read it back after [`Rows::insert`] (its
    /// `seq` is 0 until then): the gate decides a fresh batch from these
    /// before writing it.
    pub fn of_scan(scan: &Scan, facility: &str) -> ScanRow {
        let decoded = scan.decoded.as_ref().ok();
        let (key, reason) = match scan.content_key(facility) {
            Ok(key) => (Some(key), None),
            // A control read is neither a pick nor a rejected read.
            Err(_) if scan.control.is_some() => (None, None),
            Err(reason) => (None, Some(reason)),
        };
        let product = decoded.filter(|_| key.is_some()).map(|d| &d.product);
        ScanRow {
            seq: 0,
            state: ScanState::Pending,
            uuid: scan.uuid.to_string(),
            scanner: scan.profile.scanner.clone(),
            scan_type: scan.profile.scan_type.as_str().to_string(),
            quantity: i64::from(scan.quantity()),
            time: scan.time.clone(),
            raw_len: scan.raw.len() as i64,
            symbology: decoded.map(|d| d.aim.as_str().to_string()),
            gtin: product.and_then(|p| p.gtin.clone()),
            ndc10: product.and_then(|p| p.ndc10.clone()),
            lot: product.and_then(|p| p.lot.clone()),
            serial: product.and_then(|p| p.serial.clone()),
            expiry: product.and_then(|p| p.expiry.map(iso_date)),
            content_key: key,
            reject_reason: reason,
            window: scan.own_window(),
            unserialised: scan.unserialised().map(|u| u.as_str().to_string()),
            resend: scan.resend,
            declared: scan
                .declared
                .as_ref()
                .map(|d| (d.what.clone(), d.by.to_string())),
            control: scan.control.clone(),
        }
    }
}

/// `YYYY-MM-DD`, as chrono's `%Y-%m-%d` writes it (without parsing the
/// format string per scan; a year beyond four digits goes to chrono).
fn iso_date(d: chrono::NaiveDate) -> String {
    use chrono::Datelike;
    match u16::try_from(d.year()) {
        Ok(y) if y <= 9999 => {
            let (m, day) = (d.month() as u8, d.day() as u8);
            let mut s = String::with_capacity(10);
            for digit in [y / 1000, y / 100 % 10, y / 10 % 10, y % 10] {
                s.push(char::from(b'0' + digit as u8));
            }
            for (sep, n) in [('-', m), ('-', day)] {
                s.push(sep);
                s.push(char::from(b'0' + n / 10));
                s.push(char::from(b'0' + n % 10));
            }
            s
        }
        _ => d.format("%Y-%m-%d").to_string(),
    }
}

/// The outbox position the next row written would get (`seq` is not
/// AUTOINCREMENT: one past the newest; the newest row is never pruned).
pub fn next_seq(tx: &Connection) -> rusqlite::Result<i64> {
    tx.prepare_cached("SELECT coalesce(max(seq), 0) + 1 FROM scans")?
        .query_row([], |r| r.get(0))
}

/// The outbox row's INSERT ([`Rows::insert`]).
const INSERT_ROW: &str = "INSERT OR IGNORE INTO scans (scan_uuid, scanner, scan_type, quantity,
        captured_ms, boot_id, boot_ns, clock_synced, raw, symbology, gtin,
        ndc10, lot, serial, expiry, content_key, reject_reason, window_ms,
        unserialised, resend, control, declared, declared_by,
        state, twin_uuid, decided_ms, ambiguous, seq)
     VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,
        ?18,?19,?20,?21,?22,?23,?24,?25,?26,?27,?28)";

/// Writes the outbox rows of one transaction, each kind of write through
/// one prepared statement (looked up in rusqlite's statement cache once,
/// not per scan).
pub struct Rows<'t> {
    tx: &'t Connection,
    insert: Option<rusqlite::CachedStatement<'t>>,
    verdict: Option<rusqlite::CachedStatement<'t>>,
}

impl<'t> Rows<'t> {
    /// Writes outbox rows inside `tx`.
    pub fn new(tx: &'t Connection) -> Rows<'t> {
        Rows {
            tx,
            insert: None,
            verdict: None,
        }
    }

    /// Write a scan's verdict (inside the decision's transaction).
    pub fn set_verdict(&mut self, seq: i64, v: SetVerdict<'_>) -> rusqlite::Result<()> {
        let update = crate::store::held(
            &mut self.verdict,
            self.tx,
            "UPDATE scans SET state = ?2, twin_uuid = ?3, decided_ms = ?4, ambiguous = ?5
             WHERE seq = ?1",
        )?;
        update.execute(params![
            seq,
            v.state,
            v.twin.map(packed),
            v.decided_ms,
            v.ambiguous.then_some(1)
        ])?;
        Ok(())
    }

    /// Insert `row` ([`ScanRow::of_scan`]) with its frame `raw`, at outbox
    /// position `seq` (`None`: the next one): `pending` when `verdict` is
    /// `None`, else already decided (the gate decided it before writing,
    /// so the row is written once, never updated). Idempotent by UUID:
    /// returns the new row's `seq`, or `None` when the outbox had the scan
    /// already (then nothing is written).
    pub fn insert(
        &mut self,
        raw: &[u8],
        row: &ScanRow,
        seq: Option<i64>,
        verdict: Option<SetVerdict<'_>>,
    ) -> rusqlite::Result<Option<i64>> {
        let tx = self.tx;
        let insert = crate::store::held(&mut self.insert, tx, INSERT_ROW)?;
        let n = insert.execute(params![
            packed(&row.uuid),
            row.scanner,
            row.scan_type,
            row.quantity,
            row.time.utc_ms,
            packed(&row.time.boot_id),
            row.time.boot_ns,
            row.time.synced,
            raw,
            row.symbology,
            row.gtin,
            row.ndc10,
            row.lot,
            row.serial,
            row.expiry,
            row.content_key.as_deref().map(packed),
            row.reject_reason,
            row.window.map(EchoWindow::ms),
            row.unserialised,
            row.resend,
            row.control,
            row.declared.as_ref().map(|d| &d.0),
            row.declared.as_ref().map(|d| packed(&d.1)),
            verdict.map_or(ScanState::Pending, |v| v.state),
            verdict.and_then(|v| v.twin).map(packed),
            verdict.and_then(|v| v.decided_ms),
            verdict.and_then(|v| v.ambiguous.then_some(1)),
            seq,
        ])?;
        if n == 0 {
            return Ok(None);
        }
        // A declared read ends its control: the control read's row says which
        // read it applied to (so it does not lapse).
        if let Some((_, by)) = &row.declared {
            tx.prepare_cached(
                "UPDATE scans SET control_end = 'applied ' || ?2
                 WHERE scan_uuid = ?1 AND control IS NOT NULL AND control_end IS NULL",
            )?
            // (?2 as text: it is spelled out in `control_end`.)
            .execute(params![packed(by), row.uuid])?;
        }
        Ok(Some(tx.last_insert_rowid()))
    }
}

/// A scan's verdict as the outbox keeps it.
#[derive(Debug, Clone, Copy)]
pub struct SetVerdict<'a> {
    /// Its new state.
    pub state: ScanState,
    /// The committed twin of an echo.
    pub twin: Option<&'a str>,
    /// An ambiguous echo ([`crate::model::Decision::ambiguous`]).
    pub ambiguous: bool,
    /// For a final state, when it was decided (Unix ms).
    pub decided_ms: Option<i64>,
}

/// End control read `control_uuid` unused (`lapsed`): its row, if it was
/// a control read still waiting for a read to apply to.
pub fn lapse_control(tx: &Connection, control_uuid: &str) -> rusqlite::Result<Option<ScanRow>> {
    let n = tx
        .prepare_cached(
            "UPDATE scans SET control_end = 'lapsed'
             WHERE scan_uuid = ?1 AND control IS NOT NULL AND control_end IS NULL",
        )?
        .execute([packed(control_uuid)])?;
    if n == 0 {
        return Ok(None);
    }
    row_of(tx, control_uuid)
}

/// End control read `control_uuid` as what it did at once (`how`, e.g.
/// `acknowledged`: an ACKNOWLEDGE read, which waits for no read).
pub fn end_control(tx: &Connection, control_uuid: &str, how: &str) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "UPDATE scans SET control_end = ?2
         WHERE scan_uuid = ?1 AND control IS NOT NULL AND control_end IS NULL",
    )?
    .execute(params![packed(control_uuid), how])?;
    Ok(())
}

/// The control reads still waiting for a read to apply to (UUIDs, in
/// capture order): after a restart none will get one. (An ACKNOWLEDGE
/// read waits for none: one not yet decided is decided as usual.)
pub fn open_controls(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut q = conn.prepare(
        "SELECT scan_uuid FROM scans WHERE state = 'control' AND control_end IS NULL
         UNION ALL
         SELECT scan_uuid FROM scans WHERE state = 'pending' AND control IS NOT NULL
             AND control <> 'acknowledge' AND control_end IS NULL",
    )?;
    q.query_map([], |r| r.get::<_, Unpacked>(0).map(|u| u.0))?
        .collect()
}

/// A scan's recorded state, as the outbox has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// Its state.
    pub state: ScanState,
    /// The committed twin of an echo.
    pub twin_uuid: Option<String>,
    /// Why it was rejected.
    pub reject_reason: Option<String>,
    /// Its content key.
    pub content_key: Option<String>,
    /// The scanner that read it.
    pub scanner: String,
    /// An ambiguous echo.
    pub ambiguous: bool,
    /// A control read: what it declares.
    pub control: Option<String>,
}

/// The recorded state of scan `scan_uuid`, if the outbox has it.
pub fn recorded(conn: &Connection, scan_uuid: &str) -> rusqlite::Result<Option<Recorded>> {
    conn.prepare_cached(
        "SELECT state, twin_uuid, reject_reason, content_key, scanner, ambiguous, control
         FROM scans WHERE scan_uuid = ?1",
    )?
    .query_row([packed(scan_uuid)], |r| {
        Ok(Recorded {
            state: r.get(0)?,
            twin_uuid: r.get::<_, Option<Unpacked>>(1)?.map(|u| u.0),
            reject_reason: r.get(2)?,
            content_key: r.get::<_, Option<Unpacked>>(3)?.map(|k| k.0),
            scanner: r.get(4)?,
            ambiguous: r.get::<_, Option<bool>>(5)?.unwrap_or(false),
            control: r.get(6)?,
        })
    })
    .optional()
}

/// Every scan with content key `key` (UUID and state, outbox order). The
/// outbox has no index on the content key (it would cost every admit a
/// random page write), so this reads the whole table: for an
/// investigation (`audit trace`), never on the scan path.
pub fn scans_with_key(conn: &Connection, key: &str) -> rusqlite::Result<Vec<(String, ScanState)>> {
    let mut q =
        conn.prepare("SELECT scan_uuid, state FROM scans WHERE content_key = ?1 ORDER BY seq")?;
    q.query_map([packed(key)], |r| {
        Ok((r.get::<_, Unpacked>(0)?.0, r.get(1)?))
    })?
    .collect()
}

/// Whether decided rows were removed from the outbox after the dedup
/// horizon ([`Store::prune_decided`]): their scans are then known only by
/// their audit records and ledger entries.
pub fn was_pruned(conn: &Connection) -> rusqlite::Result<bool> {
    Ok(crate::store::get_meta(conn, raw::OUTBOX_PRUNED_THROUGH)?.is_some())
}

/// Whether scan `scan_uuid` is in this outbox (was read by this gateway).
pub fn has_scan(conn: &Connection, scan_uuid: &str) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM scans WHERE scan_uuid = ?1)")?
        .query_row([packed(scan_uuid)], |r| r.get(0))
}

/// Whether a scan of this outbox is recorded as an echo of `twin`
/// (`scans_twin`).
pub fn has_echo_of(conn: &Connection, twin: &str) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM scans WHERE twin_uuid = ?1)")?
        .query_row([packed(twin)], |r| r.get(0))
}

/// The content key of scan `scan_uuid` (`None`: no such scan, or it was
/// rejected and has none).
pub fn content_key_of(conn: &Connection, scan_uuid: &str) -> rusqlite::Result<Option<String>> {
    conn.query_row(
        "SELECT content_key FROM scans WHERE scan_uuid = ?1",
        [packed(scan_uuid)],
        |r| r.get::<_, Option<Unpacked>>(0),
    )
    .optional()
    .map(|k| k.flatten().map(|k| k.0))
}

/// The row of scan `scan_uuid`, if the outbox has it.
pub fn row_of(conn: &Connection, scan_uuid: &str) -> rusqlite::Result<Option<ScanRow>> {
    conn.prepare_cached(concat!(
        "SELECT ",
        COLUMNS!(),
        " FROM scans WHERE scan_uuid = ?1"
    ))?
    .query_row([packed(scan_uuid)], ScanRow::read)
    .optional()
}

#[cfg(test)]
mod tests;
