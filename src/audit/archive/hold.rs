//! The ledger consumers' hold on a prune: an entry a registered consumer
//! ([`crate::ledger::cursor`]) has not acknowledged stays, with the
//! record that committed it and every record after, until it is past
//! `[records] keep_days` + `consumer_hold_days`; then it goes all the
//! same, and the checkpoint record names the consumer and its entries.

use crate::audit::AuditUnacknowledged;
use crate::store::{Store, StoreError};
use rusqlite::{OptionalExtension, params};

/// The consumers' positions, and the capture time before which what they
/// owe is past retention.
pub(super) struct Hold {
    positions: Vec<(String, i64)>,
    cut_ms: i64,
    held_days: u64,
}

impl Hold {
    /// Read the consumers of `store` at `now_ms`, what they owe kept for
    /// `held_days` (`[records] keep_days` + `consumer_hold_days`).
    pub(super) fn read(store: &Store, now_ms: i64, held_days: u64) -> Result<Hold, StoreError> {
        Ok(Hold {
            positions: crate::ledger::cursor::positions(&store.conn)
                .map_err(|e| store.err_at(e))?,
            cut_ms: now_ms - held_days as i64 * 86_400_000,
            held_days,
        })
    }

    /// The first record that committed an entry some consumer has not
    /// acknowledged and that is not past retention, and why it stays.
    pub(super) fn first_held(&self, store: &Store) -> Result<Option<(i64, String)>, StoreError> {
        let err = |e| store.err_at(e);
        let mut first: Option<(i64, String)> = None;
        for (name, from) in &self.positions {
            // (The scan as stored, packed: compared with the audit's as is.)
            let owed: Option<(i64, rusqlite::types::Value)> = store
                .conn
                .query_row(
                    "SELECT seq, scan_uuid FROM ledger WHERE seq > ?1 AND captured_ms >= ?2
                     ORDER BY seq LIMIT 1",
                    params![from, self.cut_ms],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()
                .map_err(err)?;
            let Some((entry, scan)) = owed else { continue };
            let record: Option<i64> = store
                .conn
                .query_row(
                    "SELECT min(seq) FROM audit WHERE scan_uuid = ?1",
                    [&scan],
                    |r| r.get(0),
                )
                .map_err(err)?;
            if let Some(record) = record.filter(|r| first.as_ref().is_none_or(|f| *r < f.0)) {
                first = Some((
                    record,
                    format!(
                        "record {record} committed ledger entry {entry}, which consumer {name} has not acknowledged (it has through entry {from}); it stays until acknowledged, or until it is past [records] keep_days + consumer_hold_days = {} days. If nobody reads that consumer any more: `scangate ledger consumers remove {name}`",
                        self.held_days
                    ),
                ));
            }
        }
        Ok(first)
    }

    /// The entries up to position `last_entry` (those a prune removes)
    /// that each consumer has not acknowledged.
    pub(super) fn unacknowledged(
        &self,
        store: &Store,
        last_entry: i64,
    ) -> Result<Vec<AuditUnacknowledged>, StoreError> {
        let mut owed = Vec::new();
        for (name, from) in self.positions.iter().filter(|(_, f)| *f < last_entry) {
            let (entries, first_seq, through_seq): (i64, Option<i64>, Option<i64>) = store
                .conn
                .query_row(
                    "SELECT count(*), min(seq), max(seq) FROM ledger WHERE seq > ?1 AND seq <= ?2",
                    [*from, last_entry],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .map_err(|e| store.err_at(e))?;
            if let (Some(first_seq), Some(through_seq)) = (first_seq, through_seq) {
                owed.push(AuditUnacknowledged {
                    consumer: name.clone(),
                    entries,
                    first_seq,
                    through_seq,
                    held_days: self.held_days,
                });
            }
        }
        Ok(owed)
    }
}
