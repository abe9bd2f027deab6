//! The rows the outbox writer has just made durable, handed in memory to
//! the facility claimer's live lane so that it need not read them back
//! from the table (reading pending rows back was a measurable share of the
//! gateway's CPU via Redis: docs/benchmarks.md).
//!
//! A cache, never the truth. Which scans are pending, and in what order,
//! is still read from the outbox, in the live lane's read snapshot
//! ([`super::open::pending_seqs`]: the `scans_pending` index alone, no row
//! read). Only a row's columns come from here, and a pending row's
//! columns do not change until its verdict. A pending row the cache does
//! not have — admitted before a restart, handed after the lane had already
//! read it, held back, evicted, or beyond a cap — is read from the table
//! as before ([`super::open::rows_by_seq`]).

use super::ScanRow;
use super::open::{self, Skip};
use rusqlite::Connection;
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// Rows handed and not yet taken beyond this, in the writer's queue and
/// again in the lane's cache, are dropped (the lane reads them from the
/// table): while the lane is held up or behind, memory stays at most
/// twice this many rows, ~1 KB each (the facility drain bench peaks at
/// ~77 MB with this cap, ~60 MB with 1,024; 2,048 cost ~3 % more
/// instructions in callgrind's `--redis` bench: docs/benchmarks.md).
const QUEUE_CAP: usize = 8192;

/// A cached row not taken within this many picks is dropped: it was
/// decided from a read of the table (handed after the lane had read it),
/// or it waits behind others; either way the table has it.
const EVICT_AFTER_PICKS: u64 = 64;

/// The writer's side: rows made durable, waiting for the live lane.
#[derive(Debug, Default)]
pub struct Admitted {
    queue: Mutex<Vec<ScanRow>>,
}

impl Admitted {
    /// Hand `rows`, each with its outbox `seq`, once their transaction
    /// has committed (never before: the lane must find them pending).
    pub fn hand(&self, rows: Vec<ScanRow>) {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        let room = QUEUE_CAP.saturating_sub(queue.len());
        queue.extend(rows.into_iter().take(room));
    }

    fn take(&self) -> Vec<ScanRow> {
        std::mem::take(&mut *self.queue.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The live lane's side: the rows handed, by `seq`, until a pick takes
/// them.
#[derive(Debug)]
pub struct Cached {
    admitted: std::sync::Arc<Admitted>,
    /// Row, and the pick that cached it.
    rows: HashMap<i64, (ScanRow, u64)>,
    picks: u64,
}

impl Cached {
    /// The lane's cache of what the writer hands to `admitted`.
    pub fn new(admitted: std::sync::Arc<Admitted>) -> Cached {
        Cached {
            admitted,
            rows: HashMap::new(),
            picks: 0,
        }
    }

    /// Up to `limit` `pending` rows not in `skip`, in capture order, read
    /// in `snapshot`: what [`open::load`] returns for
    /// [`open::Open::Pending`], the rows' columns from the cache where it
    /// has them. A row returned leaves the cache.
    pub fn load_pending(
        &mut self,
        snapshot: &Connection,
        skip: &Skip,
        limit: usize,
    ) -> rusqlite::Result<Vec<ScanRow>> {
        self.picks += 1;
        for row in self.admitted.take() {
            if self.rows.len() >= QUEUE_CAP {
                break;
            }
            self.rows.insert(row.seq, (row, self.picks));
        }
        let seqs = open::pending_seqs(snapshot, skip, limit)?;
        let mut found: Vec<Option<ScanRow>> = seqs
            .iter()
            .map(|seq| self.rows.remove(seq).map(|(row, _)| row))
            .collect();
        let missing: Vec<i64> = seqs
            .iter()
            .zip(&found)
            .filter(|(_, row)| row.is_none())
            .map(|(seq, _)| *seq)
            .collect();
        if !missing.is_empty() {
            let mut read: HashMap<i64, ScanRow> = open::rows_by_seq(snapshot, &missing)?
                .into_iter()
                .map(|row| (row.seq, row))
                .collect();
            for (seq, slot) in seqs.iter().zip(&mut found) {
                if slot.is_none() {
                    *slot = read.remove(seq);
                }
            }
        }
        let picks = self.picks;
        if picks.is_multiple_of(16) {
            self.rows
                .retain(|_, (_, at)| picks - *at < EVICT_AFTER_PICKS);
            // (A burst's peak is not kept allocated.)
            self.rows.shrink_to(QUEUE_CAP.min(self.rows.len() * 2));
        }
        // (A seq the index named is in the snapshot's table: found.)
        Ok(found.into_iter().flatten().collect())
    }

    /// Rows cached now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether nothing is cached.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outbox::open::{Open, load, skip};
    use crate::store::Store;
    use std::sync::Arc;

    fn rows(store: &Store, n: usize, from_ms: i64) -> Vec<ScanRow> {
        let scans = crate::outbox::tests::reads();
        let mut made = Vec::new();
        for i in 0..n {
            let mut scan = scans[i % scans.len()].clone();
            scan.uuid = uuid::Uuid::now_v7();
            // Capture order differs from outbox order.
            scan.time.utc_ms = from_ms - i as i64 * 7 % 5;
            let mut row = ScanRow::of_scan(&scan, "pharmacy-1");
            row.seq = crate::outbox::Rows::new(&store.conn)
                .insert(&scan.raw, &row, None, None)
                .unwrap()
                .unwrap();
            made.push(row);
        }
        made
    }

    /// With every row handed, some handed twice or late, some never: the
    /// cache's answer is the table's, row for row and in order, whatever
    /// it holds.
    #[test]
    fn the_cache_answers_what_the_table_does() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let admitted = Arc::new(Admitted::default());
        let mut cached = Cached::new(admitted.clone());
        let made = rows(&store, 40, 1_764_000_000_000);
        // Handed: every other row (the rest must be read), one twice.
        admitted.hand(made.iter().step_by(2).cloned().collect());
        admitted.hand(vec![made[0].clone()]);
        let none = skip(&[]);
        for limit in [5, 40, 100] {
            let want = load(&store.conn, Open::Pending, &none, limit).unwrap();
            let got = cached.load_pending(&store.conn, &none, limit).unwrap();
            assert_eq!(got, want, "limit {limit}");
        }
        // Past a round in flight, and after rows were decided behind the
        // cache's back: still the table's answer.
        store
            .conn
            .execute("UPDATE scans SET state = 'committed' WHERE seq % 3 = 0", [])
            .unwrap();
        admitted.hand(made.clone());
        let in_flight = skip(&[made[1].seq, made[5].seq]);
        let want = load(&store.conn, Open::Pending, &in_flight, 100).unwrap();
        let got = cached.load_pending(&store.conn, &in_flight, 100).unwrap();
        assert_eq!(got, want);
        // What was never taken (decided rows) is dropped in time.
        assert!(!cached.is_empty());
        for _ in 0..EVICT_AFTER_PICKS + 16 {
            cached.load_pending(&store.conn, &none, 1).unwrap();
        }
        assert!(cached.is_empty(), "{} rows kept", cached.len());
    }

    /// The pending rows' order and membership come from the index alone.
    #[test]
    fn pending_seqs_walk_the_index_without_reading_rows() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut q = store
            .conn
            .prepare(&format!("EXPLAIN QUERY PLAN {}", open::PENDING_SEQS))
            .unwrap();
        let plan: Vec<String> = q
            .query_map(rusqlite::params![10, skip(&[1])], |r| r.get::<_, String>(3))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let plan = plan.join("; ");
        assert!(
            plan.contains("USING COVERING INDEX scans_pending"),
            "{plan}"
        );
    }

    /// A queue the lane does not take from stops growing, and so does the
    /// lane's cache while the lane is behind (rows handed faster than it
    /// takes them): what is dropped is read from the table.
    #[test]
    fn the_queue_and_the_cache_are_capped() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let admitted = Arc::new(Admitted::default());
        let made = rows(&store, 3, 1_764_000_000_000);
        let many = |first: i64| -> Vec<ScanRow> {
            (0..QUEUE_CAP as i64)
                .map(|i| ScanRow {
                    seq: first + i,
                    ..made[0].clone()
                })
                .collect()
        };
        admitted.hand(many(1_000));
        admitted.hand(many(1_000_000));
        assert_eq!(admitted.take().len(), QUEUE_CAP);
        let mut cached = Cached::new(admitted.clone());
        for round in 0..100 {
            admitted.hand(many(10_000 * (round + 2)));
            let got = cached.load_pending(&store.conn, &skip(&[]), 1).unwrap();
            assert_eq!(
                got,
                load(&store.conn, Open::Pending, &skip(&[]), 1).unwrap()
            );
            assert!(cached.len() <= QUEUE_CAP, "{} rows cached", cached.len());
        }
    }
}
