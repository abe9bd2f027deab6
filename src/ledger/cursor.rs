//! Ledger consumers of the gateway's own database: each a durable cursor
//! (the `ledger_consumers` table, migration 8), so a consumer reads the
//! embedded ledger at-least-once, in ledger order, from where it left off.
//!
//! A consumer is [`register`]ed by name (from the first entry), reads the
//! entries after its cursor a [`page`] at a time, and [`ack`]s the last
//! one it has delivered; nothing else moves the cursor. `ledger export
//! --follow --consumer NAME` is one; a sink inside the daemon can be
//! another. `audit prune` keeps what a consumer owes ([`positions`]);
//! `status` and the metrics show each one's lag ([`lags`]).
//!
//! Every function takes a connection inside the caller's transaction: a
//! page and its position are read in one read transaction (a
//! [`crate::store::Read`]), a registration or an ack is one tiny write.
//! A consumer's loop, as `cmd/ledger/follow.rs` runs it:
//!
//! ```text
//! register(&store.write()?, name, now)            (commit)
//! loop {
//!     page = page(&store.read()?, name, 100)       (None: removed, stop)
//!     empty: wait for a commit (PRAGMA data_version), again
//!     deliver page.entries (write, flush / POST …)  (failed: nothing acked)
//!     ack(&store.write()?, name, last entry, now)  (commit; false: removed)
//! }
//! ```
//!
//! **Positions that start again.** `seq` is SQLite's rowid: were every
//! entry pruned, the next one would be 1 again. A cursor therefore keeps
//! the scan of the entry it acknowledged too; when the entry at its
//! position is another scan's, or the ledger ends before its position,
//! the ledger started again and the cursor reads from its start
//! ([`Page::restarted`]).

use super::{ENTRY_COLUMNS, LedgerEntry, entry_of};
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

/// A consumer name: 1-64 letters, digits, `-`, `_` or `.`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

/// Register consumer `name` at `now_ms`, reading from the first entry the
/// ledger keeps; an existing one keeps its cursor. True if it was new.
pub fn register(tx: &Connection, name: &str, now_ms: i64) -> rusqlite::Result<bool> {
    Ok(tx
        .prepare_cached(
            "INSERT INTO ledger_consumers (name, registered_ms) VALUES (?1, ?2)
             ON CONFLICT (name) DO NOTHING",
        )?
        .execute(params![name, now_ms])?
        > 0)
}

/// Whether consumer `name` is registered.
pub fn registered(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT 1 FROM ledger_consumers WHERE name = ?1")?
        .exists([name])
}

/// Remove consumer `name`: it no longer holds any entry from a prune. True
/// if there was one.
pub fn remove(tx: &Connection, name: &str) -> rusqlite::Result<bool> {
    Ok(tx
        .prepare_cached("DELETE FROM ledger_consumers WHERE name = ?1")?
        .execute([name])?
        > 0)
}

/// Move consumer `name`'s cursor to `entry` (the last one it delivered) at
/// `now_ms`. False if it is not registered (removed meanwhile): nothing
/// is written.
pub fn ack(
    tx: &Connection,
    name: &str,
    entry: &LedgerEntry,
    now_ms: i64,
) -> rusqlite::Result<bool> {
    ack_at(tx, name, entry.seq, &entry.scan_uuid, now_ms)
}

/// [`ack`] of the entry at position `seq` of scan `scan_uuid` (a sink's
/// held batch keeps only its last entry's position and scan).
pub fn ack_at(
    tx: &Connection,
    name: &str,
    seq: i64,
    scan_uuid: &str,
    now_ms: i64,
) -> rusqlite::Result<bool> {
    Ok(tx
        .prepare_cached(
            "UPDATE ledger_consumers SET acked_seq = ?2, acked_uuid = ?3, acked_ms = ?4
             WHERE name = ?1",
        )?
        .execute(params![name, seq, scan_uuid, now_ms])?
        > 0)
}

/// The entries after a consumer's cursor, oldest first.
#[derive(Debug, Clone)]
pub struct Page {
    /// At most the page's size, in ledger order.
    pub entries: Vec<LedgerEntry>,
    /// The ledger's positions started again (every entry was pruned)
    /// since the cursor was acknowledged: the page is from its start.
    pub restarted: bool,
}

/// Up to `limit` entries after consumer `name`'s cursor, in ledger order;
/// `None` if it is not registered. Call it inside a read transaction, so
/// the position and the page agree.
pub fn page(conn: &Connection, name: &str, limit: usize) -> rusqlite::Result<Option<Page>> {
    let Some(cursor) = cursor_of(conn, name)? else {
        return Ok(None);
    };
    let from = position(conn, &cursor)?;
    let mut q = conn.prepare_cached(&format!(
        "SELECT {ENTRY_COLUMNS} FROM ledger WHERE seq > ?1 ORDER BY seq LIMIT ?2"
    ))?;
    let entries = q
        .query_map(params![from, limit as i64], entry_of)?
        .collect::<rusqlite::Result<_>>()?;
    Ok(Some(Page {
        entries,
        restarted: from < cursor.acked_seq,
    }))
}

/// What a consumer row holds.
struct Cursor {
    acked_seq: i64,
    acked_uuid: Option<String>,
}

/// Consumer `name`'s row.
fn cursor_of(conn: &Connection, name: &str) -> rusqlite::Result<Option<Cursor>> {
    conn.prepare_cached("SELECT acked_seq, acked_uuid FROM ledger_consumers WHERE name = ?1")?
        .query_row([name], |r| {
            Ok(Cursor {
                acked_seq: r.get(0)?,
                acked_uuid: r.get(1)?,
            })
        })
        .optional()
}

/// Where a cursor reads from: after its acknowledged entry, or from the
/// start if the ledger's positions started again since.
fn position(conn: &Connection, cursor: &Cursor) -> rusqlite::Result<i64> {
    if cursor.acked_seq <= 0 {
        return Ok(0);
    }
    let at: Option<String> = conn
        .prepare_cached("SELECT scan_uuid FROM ledger WHERE seq = ?1")?
        .query_row([cursor.acked_seq], |r| {
            r.get::<_, crate::store::packed::Unpacked>(0).map(|u| u.0)
        })
        .optional()?;
    let restarted = match at {
        // Another scan at its position: the positions were used again.
        Some(uuid) => cursor.acked_uuid.as_ref().is_some_and(|a| *a != uuid),
        // Its entry was pruned (a prefix of the ledger goes): newer ones
        // follow it, unless the ledger now ends before it.
        None => last_seq(conn)? < cursor.acked_seq && first_seq(conn)?.is_some(),
    };
    Ok(if restarted { 0 } else { cursor.acked_seq })
}

/// The newest entry's position (0: none).
fn last_seq(conn: &Connection) -> rusqlite::Result<i64> {
    conn.prepare_cached("SELECT coalesce(max(seq), 0) FROM ledger")?
        .query_row([], |r| r.get(0))
}

/// The oldest entry's position, if any.
fn first_seq(conn: &Connection) -> rusqlite::Result<Option<i64>> {
    conn.prepare_cached("SELECT min(seq) FROM ledger")?
        .query_row([], |r| r.get(0))
}

/// Every consumer with the position it reads from (what it has
/// acknowledged through), by name: what a prune must keep.
pub fn positions(conn: &Connection) -> rusqlite::Result<Vec<(String, i64)>> {
    rows(conn)?
        .into_iter()
        .map(|r| Ok((r.name, position(conn, &r.cursor)?)))
        .collect()
}

/// A consumer's row.
struct Row {
    name: String,
    cursor: Cursor,
    acked_ms: Option<i64>,
    registered_ms: i64,
}

/// Every consumer's row, by name.
fn rows(conn: &Connection) -> rusqlite::Result<Vec<Row>> {
    conn.prepare_cached(
        "SELECT name, acked_seq, acked_uuid, acked_ms, registered_ms
         FROM ledger_consumers ORDER BY name",
    )?
    .query_map([], |r| {
        Ok(Row {
            name: r.get(0)?,
            cursor: Cursor {
                acked_seq: r.get(1)?,
                acked_uuid: r.get(2)?,
            },
            acked_ms: r.get(3)?,
            registered_ms: r.get(4)?,
        })
    })?
    .collect()
}

/// A consumer and how far behind the ledger it is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Lag {
    /// Its name.
    pub name: String,
    /// The last entry it acknowledged (0: none yet; after the ledger's
    /// positions started again, 0 until it acknowledges one).
    pub acked_seq: i64,
    /// When it last acknowledged (Unix ms; `None`: never).
    pub acked_ms: Option<i64>,
    /// When it was registered (Unix ms).
    pub registered_ms: i64,
    /// Entries after its cursor, not acknowledged.
    pub behind: i64,
    /// Capture time (Unix ms) of the oldest of them (`None`: none).
    pub oldest_unacked_ms: Option<i64>,
}

/// Every consumer's lag, by name. Each figure is an index seek, whatever
/// the lag: the entries behind are counted as positions (entries are
/// only ever pruned from the start, so the positions after a cursor are
/// all still there).
pub fn lags(conn: &Connection) -> rusqlite::Result<Vec<Lag>> {
    let last = last_seq(conn)?;
    let first = first_seq(conn)?.unwrap_or(last + 1);
    let mut oldest =
        conn.prepare_cached("SELECT captured_ms FROM ledger WHERE seq > ?1 ORDER BY seq LIMIT 1")?;
    rows(conn)?
        .into_iter()
        .map(|row| {
            let from = position(conn, &row.cursor)?;
            Ok(Lag {
                name: row.name,
                acked_seq: from,
                acked_ms: row.acked_ms,
                registered_ms: row.registered_ms,
                behind: (last - from.max(first - 1)).max(0),
                oldest_unacked_ms: oldest.query_row([from], |r| r.get(0)).optional()?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    /// A ledger row for scan `uuid`, captured at `ms`.
    fn entry(conn: &Connection, uuid: &str, ms: i64) {
        conn.execute(
            "INSERT INTO ledger (scan_uuid, gateway, scanner, captured_ms, boot_id, boot_ns,
                 clock_synced, scan_type, quantity, symbology, content_key, key_prefix)
             VALUES (?1, 'gw', 'counter-1', ?2, 'b', 0, 1, 'dispense', 1, ']d2', 'k', 0)",
            params![uuid, ms],
        )
        .unwrap();
    }

    fn seqs(page: &Page) -> Vec<i64> {
        page.entries.iter().map(|e| e.seq).collect()
    }

    /// Pages follow the cursor in ledger order; two consumers keep their
    /// own; an ack of a removed consumer writes nothing.
    #[test]
    fn each_consumer_reads_after_its_own_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let c = &store.conn;
        for i in 0..5 {
            entry(c, &format!("u{i}"), 1000 + i);
        }
        assert!(register(c, "a", 1).unwrap());
        assert!(register(c, "b", 1).unwrap());
        assert!(!register(c, "a", 2).unwrap(), "registered once");
        let p = page(c, "a", 2).unwrap().unwrap();
        assert_eq!(seqs(&p), [1, 2]);
        assert!(ack(c, "a", &p.entries[1], 10).unwrap());
        assert_eq!(seqs(&page(c, "a", 10).unwrap().unwrap()), [3, 4, 5]);
        assert_eq!(seqs(&page(c, "b", 10).unwrap().unwrap()), [1, 2, 3, 4, 5]);
        let lag = lags(c).unwrap();
        assert_eq!((lag[0].behind, lag[0].oldest_unacked_ms), (3, Some(1002)));
        assert_eq!((lag[1].behind, lag[1].oldest_unacked_ms), (5, Some(1000)));
        assert!(page(c, "nobody", 1).unwrap().is_none());
        let e = page(c, "b", 1).unwrap().unwrap().entries.remove(0);
        assert!(remove(c, "b").unwrap());
        assert!(!ack(c, "b", &e, 11).unwrap());
    }

    /// Every entry pruned, then new ones at positions 1, 2, …: a cursor
    /// past them, or at one of them with another scan, reads from the
    /// start; a cursor whose entry alone was pruned goes on after it.
    #[test]
    fn a_ledger_whose_positions_started_again_is_read_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let c = &store.conn;
        for i in 0..3 {
            entry(c, &format!("old{i}"), i);
        }
        register(c, "far", 0).unwrap();
        register(c, "one", 0).unwrap();
        register(c, "mid", 0).unwrap();
        let all = page(c, "far", 10).unwrap().unwrap().entries;
        ack(c, "far", &all[2], 1).unwrap();
        ack(c, "one", &all[0], 1).unwrap();
        ack(c, "mid", &all[1], 1).unwrap();
        // Entry 1 pruned alone: "one" goes on after it.
        c.execute("DELETE FROM ledger WHERE seq = 1", []).unwrap();
        let p = page(c, "one", 10).unwrap().unwrap();
        assert_eq!((seqs(&p), p.restarted), (vec![2, 3], false));
        // Everything pruned: nothing to read, nothing started again yet.
        c.execute("DELETE FROM ledger", []).unwrap();
        assert!(page(c, "far", 10).unwrap().unwrap().entries.is_empty());
        entry(c, "new0", 10);
        entry(c, "new1", 11);
        for name in ["far", "one"] {
            let p = page(c, name, 10).unwrap().unwrap();
            assert_eq!((seqs(&p), p.restarted), (vec![1, 2], true), "{name}");
        }
        // "mid" acknowledged position 2 (old1): now new1 is there.
        let p = page(c, "mid", 10).unwrap().unwrap();
        assert_eq!((seqs(&p), p.restarted), (vec![1, 2], true));
        assert_eq!(lags(c).unwrap()[0].behind, 2);
    }
}
