//! The open scans (`pending`, `unresolved`): read in capture order, and
//! probed by the facility claimer's lanes for each other's earlier scans.
//!
//! Each open state has a partial index (`scans_pending`,
//! `scans_unresolved`, by capture order). SQLite uses a partial index only
//! for a query that names its state literally, so every statement here is
//! written once per state (the `per_state!` macro), never with the state as
//! a parameter.

use super::{COLUMNS, ScanRow};
use crate::store::packed::packed;
use rusqlite::{Connection, OptionalExtension, params};

/// The two open states, one per claimer lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Open {
    /// New scans, not decided yet.
    Pending,
    /// Scans waiting for the facility store.
    Unresolved,
}

/// Statements per open state, each walking its own partial index.
macro_rules! per_state {
    ($state:expr, $pending:expr, $unresolved:expr) => {
        match $state {
            Open::Pending => $pending,
            Open::Unresolved => $unresolved,
        }
    };
}

/// Outbox rows (`seq`) a query must pass over: a claim round in flight.
/// Filtering in SQL spares decoding rows only to drop them.
pub type Skip = std::rc::Rc<Vec<rusqlite::types::Value>>;

/// [`Skip`] for these rows.
pub fn skip(seqs: &[i64]) -> Skip {
    std::rc::Rc::new(seqs.iter().map(|&seq| seq.into()).collect())
}

/// Up to `limit` open rows of `state` not in `skip`, in capture order.
pub fn load(
    conn: &Connection,
    state: Open,
    skip: &Skip,
    limit: usize,
) -> rusqlite::Result<Vec<ScanRow>> {
    let mut q = conn.prepare_cached(load_sql(state))?;
    q.query_map(params![limit as i64, skip], ScanRow::read)?
        .collect()
}

/// [`load`]'s statement.
fn load_sql(state: Open) -> &'static str {
    macro_rules! load {
        ($state:literal) => {
            concat!(
                "SELECT ",
                COLUMNS!(),
                " FROM scans WHERE state = '",
                $state,
                "' AND seq NOT IN rarray(?2) ORDER BY captured_ms, boot_ns, scan_uuid LIMIT ?1"
            )
        };
    }
    per_state!(state, load!("pending"), load!("unresolved"))
}

/// [`pending_seqs`]'s statement: [`load`]'s for `pending`, the outbox
/// positions only — answered from the `scans_pending` index alone (its
/// columns and the rowid), no row read.
pub const PENDING_SEQS: &str = "SELECT seq FROM scans WHERE state = 'pending'
    AND seq NOT IN rarray(?2) ORDER BY captured_ms, boot_ns, scan_uuid LIMIT ?1";

/// The outbox positions of what [`load`] returns for [`Open::Pending`],
/// in its order (the live lane's rows then come from memory:
/// [`super::admitted`]).
pub fn pending_seqs(conn: &Connection, skip: &Skip, limit: usize) -> rusqlite::Result<Vec<i64>> {
    conn.prepare_cached(PENDING_SEQS)?
        .query_map(params![limit as i64, skip], |r| r.get(0))?
        .collect()
}

/// The rows at outbox positions `seqs` (any order; a position with no row
/// is left out).
pub fn rows_by_seq(conn: &Connection, seqs: &[i64]) -> rusqlite::Result<Vec<ScanRow>> {
    conn.prepare_cached(concat!(
        "SELECT ",
        COLUMNS!(),
        " FROM scans WHERE seq IN rarray(?1)"
    ))?
    .query_map([skip(seqs)], ScanRow::read)?
    .collect()
}

/// Whether an `unresolved` scan whose wall time is not trusted yet has
/// content key `key` — with `None`, whether there is any (migration 4).
pub fn unsynced_unresolved(conn: &Connection, key: Option<&str>) -> rusqlite::Result<bool> {
    match key {
        Some(key) => conn
            .prepare_cached(
                "SELECT 1 FROM scans WHERE state = 'unresolved' AND clock_synced = 0
                   AND content_key = ?1 LIMIT 1",
            )?
            .exists([packed(key)]),
        None => conn
            .prepare_cached(
                "SELECT 1 FROM scans INDEXED BY scans_unsynced
                 WHERE state = 'unresolved' AND clock_synced = 0 LIMIT 1",
            )?
            .exists([]),
    }
}

/// Whether `pending` scans wait in the outbox (an index probe).
pub fn has_pending(conn: &Connection) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM scans WHERE state = 'pending')")?
        .query_row([], |r| r.get(0))
}

/// Whether `unresolved` scans wait in the outbox (an index probe).
pub fn has_unresolved(conn: &Connection) -> rusqlite::Result<bool> {
    conn.prepare_cached(
        "SELECT captured_ms FROM scans WHERE state = 'unresolved'
         ORDER BY captured_ms DESC, boot_ns DESC, scan_uuid DESC LIMIT 1",
    )?
    .query_row([], |r| r.get::<_, i64>(0))
    .optional()
    .map(|t| t.is_some())
}

/// The earliest and latest wall-clock capture times of the scans in
/// `state` (two index probes), if there are any.
pub fn span(conn: &Connection, state: Open) -> rusqlite::Result<Option<(i64, i64)>> {
    conn.prepare_cached(span_sql(state))?.query_row([], |r| {
        Ok(r.get::<_, Option<i64>>(0)?.zip(r.get::<_, Option<i64>>(1)?))
    })
}

/// [`span`]'s statement: two subqueries, each reading one end of the
/// state's index (a `min` and a `max` in one select would walk all of it).
fn span_sql(state: Open) -> &'static str {
    macro_rules! span {
        ($state:literal) => {
            concat!(
                "SELECT (SELECT captured_ms FROM scans WHERE state = '",
                $state,
                "' ORDER BY captured_ms, boot_ns, scan_uuid LIMIT 1),
                        (SELECT captured_ms FROM scans WHERE state = '",
                $state,
                "' ORDER BY captured_ms DESC, boot_ns DESC, scan_uuid DESC LIMIT 1)"
            )
        };
    }
    per_state!(state, span!("pending"), span!("unresolved"))
}

/// Whether a scan in `state` with content key `key` was captured (wall
/// clock) from `from_ms` on and before `row` in capture order. The state's
/// index is searched by time: the range is one window wide, and nearly
/// always empty; an index by content key would cost a random page write
/// per scan instead.
pub fn earlier_with_key(
    conn: &Connection,
    state: Open,
    key: &str,
    from_ms: i64,
    row: &ScanRow,
) -> rusqlite::Result<bool> {
    conn.prepare_cached(earlier_with_key_sql(state))?
        .exists(params![
            packed(key),
            from_ms,
            row.time.utc_ms,
            row.time.boot_ns,
            packed(&row.uuid)
        ])
}

/// [`earlier_with_key`]'s statement.
fn earlier_with_key_sql(state: Open) -> &'static str {
    macro_rules! earlier {
        ($state:literal, $index:literal) => {
            concat!(
                "SELECT 1 FROM scans INDEXED BY ",
                $index,
                " WHERE state = '",
                $state,
                "' AND captured_ms BETWEEN ?2 AND ?3 AND content_key = ?1
                   AND (captured_ms, boot_ns, scan_uuid) < (?3, ?4, ?5) LIMIT 1"
            )
        };
    }
    per_state!(
        state,
        earlier!("pending", "scans_pending"),
        earlier!("unresolved", "scans_unresolved")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    /// Each claimer lane reads its open scans in its partial index, in
    /// capture order (no sort of the whole backlog), skipping its round in
    /// flight inside the query.
    #[test]
    fn open_scans_are_read_in_index_order_past_the_round_in_flight() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let skip = skip(&[1]);
        for (state, index) in [
            (Open::Pending, "scans_pending"),
            (Open::Unresolved, "scans_unresolved"),
        ] {
            assert!(load(&store.conn, state, &skip, 10).unwrap().is_empty());
            let mut q = store
                .conn
                .prepare(&format!("EXPLAIN QUERY PLAN {}", load_sql(state)))
                .unwrap();
            let plan: Vec<String> = q
                .query_map(params![10, skip], |r| r.get::<_, String>(3))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            let plan = plan.join("; ");
            assert!(plan.contains(&format!("USING INDEX {index}")), "{plan}");
            assert!(!plan.contains("TEMP B-TREE FOR ORDER BY"), "{plan}");
        }
    }

    /// The other lane's time span and its earlier scans of a label are read
    /// at the ends of, or in a window of, its partial index — never by
    /// walking the whole backlog (a million rows after an outage).
    #[test]
    fn the_other_lanes_scans_are_probed_not_walked() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store
            .conn
            .execute_batch(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 4000)
                 INSERT INTO scans (scan_uuid, scanner, scan_type, quantity, captured_ms,
                     boot_id, boot_ns, clock_synced, raw, content_key, state)
                 SELECT 'u' || i, 's', 'dispense', 1, i * 10, 'b', i, 1, x'00', 'k' || (i % 7),
                     CASE WHEN i % 2 = 0 THEN 'pending' ELSE 'unresolved' END FROM n",
            )
            .unwrap();
        for state in [Open::Pending, Open::Unresolved] {
            let mut q = store.conn.prepare(span_sql(state)).unwrap();
            let span: (i64, i64) = q.query_row([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
            assert!(span.0 <= 20 && span.1 >= 39_990, "{span:?}");
            let steps = q.get_status(rusqlite::StatementStatus::VmStep);
            assert!(steps < 200, "the span took {steps} steps");
            let mut q = store.conn.prepare(earlier_with_key_sql(state)).unwrap();
            let found = q
                .exists(params!["k1", 39_900, 40_000, 4000, "u4000"])
                .unwrap();
            assert!(found);
            let steps = q.get_status(rusqlite::StatementStatus::VmStep);
            assert!(steps < 400, "the lookup took {steps} steps");
        }
    }

    /// The backlog's untrusted-time scans are found by key in their own
    /// small index, never by walking the backlog.
    #[test]
    fn untrusted_time_backlog_scans_are_found_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert!(!unsynced_unresolved(&store.conn, None).unwrap());
        assert!(!unsynced_unresolved(&store.conn, Some("k")).unwrap());
        let plan: String = store
            .conn
            .query_row(
                "EXPLAIN QUERY PLAN SELECT 1 FROM scans WHERE state = 'unresolved'
                   AND clock_synced = 0 AND content_key = 'k' LIMIT 1",
                [],
                |r| r.get(3),
            )
            .unwrap();
        assert!(
            plan.contains("INDEX scans_unsynced (content_key=?)"),
            "{plan}"
        );
    }
}
