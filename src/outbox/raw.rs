//! Raw-bytes retention: what scanners sent is overwritten once the scan is
//! decided and `[outbox] keep_raw_hours` old; and decided rows are removed
//! after the dedup horizon (the audit record is the record of a decision,
//! not the outbox row). The sweeper thread drives both.

use crate::model::ScanState;
use crate::store::packed::Unpacked;
use crate::store::{Store, StoreError, get_meta, put_meta};
use rusqlite::{Transaction, params};

/// Rows looked at per transaction when raw bytes are cleared, so the
/// writers' turn is held for a few milliseconds at a time.
pub const CLEAR_CHUNK: i64 = 500;

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
    pub held_by: Option<SweepBlocker>,
    /// `keep_going` said stop before the sweep was done.
    pub interrupted: bool,
}

/// An open outbox row that holds a raw-bytes sweep back.
#[derive(Debug, PartialEq, Eq)]
pub struct SweepBlocker {
    /// Its outbox position.
    pub seq: i64,
    /// `pending` or `unresolved`.
    pub state: ScanState,
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
    HeldBy(SweepBlocker),
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

impl Store {
    /// Remove decided outbox rows captured and decided before `before_ms`
    /// (the sweeper passes the dedup horizon, `[dedup] retention_hours`),
    /// except the scans in `keep` (committed scans whose ledger entry is
    /// still inside the horizon: a reconciliation re-publishes them from
    /// their rows). In outbox order, [`CLEAR_CHUNK`] rows per write turn,
    /// asking `keep_going` between chunks; it stops at the first row that
    /// is open, younger, or kept, so the outbox stays a contiguous tail.
    /// Returns the rows removed.
    pub fn prune_decided(
        &mut self,
        before_ms: i64,
        keep: &std::collections::HashSet<String>,
        keep_going: &mut dyn FnMut() -> bool,
    ) -> Result<u64, StoreError> {
        let mut pruned = 0;
        while keep_going() {
            let w = self.write()?;
            let (n, more) = prune_chunk(&w.tx, before_ms, keep).map_err(|e| w.err(e))?;
            w.commit()?;
            pruned += n;
            if !more {
                break;
            }
        }
        Ok(pruned)
    }
}

/// `meta` key: decided outbox rows up to this `seq` were removed.
pub(super) const OUTBOX_PRUNED_THROUGH: &str = "outbox_pruned_through";

/// The states of a decided row (only those are removed): a control read
/// once a read followed it or it lapsed.
const DECIDED: &str = "(state IN ('committed', 'suppressed', 'rejected')
    OR (state = 'control' AND control_end IS NOT NULL))";

/// One chunk of [`Store::prune_decided`]: rows removed, and whether a full
/// chunk was (so there may be more).
fn prune_chunk(
    tx: &Transaction<'_>,
    before_ms: i64,
    keep: &std::collections::HashSet<String>,
) -> rusqlite::Result<(u64, bool)> {
    let rows: Vec<(i64, String, Option<i64>, i64)> = tx
        .prepare_cached(&format!(
            "SELECT seq, scan_uuid, CASE WHEN {DECIDED} THEN decided_ms END, captured_ms
             FROM scans ORDER BY seq LIMIT ?1"
        ))?
        .query_map([CLEAR_CHUNK], |r| {
            Ok((r.get(0)?, r.get::<_, Unpacked>(1)?.0, r.get(2)?, r.get(3)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let full = rows.len() as i64 == CLEAR_CHUNK;
    // The newest row always stays: `seq` is not AUTOINCREMENT, so an empty
    // table would hand out positions again that the raw sweep's cursor
    // (`raw_cleared_through`) has passed.
    let newest: i64 = tx
        .prepare_cached("SELECT coalesce(max(seq), 0) FROM scans")?
        .query_row([], |r| r.get(0))?;
    let through = rows
        .iter()
        .take_while(|(seq, uuid, decided_ms, captured_ms)| {
            *seq < newest
                && decided_ms.is_some_and(|d| d < before_ms)
                && *captured_ms < before_ms
                && !keep.contains(uuid)
        })
        .map(|r| r.0)
        .enumerate()
        .last();
    let Some((i, through)) = through else {
        return Ok((0, false));
    };
    let n = tx
        .prepare_cached(&format!("DELETE FROM scans WHERE seq <= ?1 AND {DECIDED}"))?
        .execute([through])?;
    put_meta(tx, OUTBOX_PRUNED_THROUGH, &through.to_string())?;
    Ok((n as u64, full && i + 1 == rows.len()))
}

/// One chunk of [`Store::clear_raw`]: rows cleared, and where it ended.
fn clear_chunk(tx: &Transaction<'_>, before_ms: i64) -> rusqlite::Result<(u64, ChunkEnd)> {
    let mut through: i64 = get_meta(tx, RAW_CLEARED_THROUGH)?
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let rows: Vec<(i64, Option<i64>, ScanState, i64)> = tx
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
                None => ChunkEnd::HeldBy(SweepBlocker {
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
    put_meta(tx, RAW_CLEARED_THROUGH, &through.to_string())?;
    Ok((cleared, end))
}
