//! The held batch of each sink (the `sink_batches` table, migration 10):
//! stored before its first POST, so that a retry — also after a restart
//! or a SIGKILL — sends the same bytes under the same key; removed, in
//! the same transaction as the consumer's cursor moves past it, after a
//! 2xx ([`delivered`]). Each failure is recorded on it ([`failed`]):
//! `status` reads what a sink is stuck on from here.

use super::batch::Batch;
use super::config::SinkFormat;
use crate::ledger::cursor;
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

/// A held batch as stored, with what its attempts met.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The sink.
    pub sink: String,
    /// The batch.
    pub batch: Batch,
    /// When it was held (Unix ms).
    pub held_ms: i64,
    /// Its failed attempts so far.
    pub state: HeldState,
}

/// What a held batch's attempts met (also `status`'s view of it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HeldState {
    /// Failed attempts.
    pub attempts: i64,
    /// The last failure's kind (`connect`, `timeout`, `status_5xx`, …).
    pub last_kind: Option<String>,
    /// The last failure, in words.
    pub last_error: Option<String>,
    /// When it was last tried (Unix ms).
    pub last_attempt_ms: Option<i64>,
    /// When its attempts began failing (Unix ms; `None`: none failed).
    pub failing_since_ms: Option<i64>,
    /// The receiver refused it in a way a retry will not change (a 4xx
    /// other than 408, 409, 425 and 429; a 3xx): retried only every 10 minutes or at a
    /// reload, never dropped.
    pub blocked: bool,
}

const COLUMNS: &str = "sink, first_seq, last_seq, last_uuid, entries, key, format, body, held_ms,
     attempts, last_kind, last_error, last_attempt_ms, failing_since_ms, blocked";

fn held_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<Held> {
    let format: String = r.get(6)?;
    Ok(Held {
        sink: r.get(0)?,
        batch: Batch {
            first_seq: r.get(1)?,
            last_seq: r.get(2)?,
            last_uuid: r.get(3)?,
            entries: r.get(4)?,
            key: r.get(5)?,
            format: if format == "epcis" {
                SinkFormat::Epcis
            } else {
                SinkFormat::Json
            },
            body: r.get(7)?,
        },
        held_ms: r.get(8)?,
        state: HeldState {
            attempts: r.get(9)?,
            last_kind: r.get(10)?,
            last_error: r.get(11)?,
            last_attempt_ms: r.get(12)?,
            failing_since_ms: r.get(13)?,
            blocked: r.get(14)?,
        },
    })
}

/// Sink `sink`'s held batch, if any.
pub fn get(conn: &Connection, sink: &str) -> rusqlite::Result<Option<Held>> {
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM sink_batches WHERE sink = ?1"
    ))?
    .query_row([sink], held_of)
    .optional()
}

/// Every held batch, by sink.
pub fn all(conn: &Connection) -> rusqlite::Result<Vec<Held>> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM sink_batches ORDER BY sink"))?
        .query_map([], held_of)?
        .collect()
}

/// Hold `batch` for sink `sink` at `now_ms`, replacing one it held (a
/// batch of another format, after the format changed).
pub fn hold(tx: &Connection, sink: &str, batch: &Batch, now_ms: i64) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT OR REPLACE INTO sink_batches
             (sink, first_seq, last_seq, last_uuid, entries, key, format, body, held_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        sink,
        batch.first_seq,
        batch.last_seq,
        batch.last_uuid,
        batch.entries,
        batch.key,
        batch.format.as_str(),
        batch.body,
        now_ms
    ])?;
    Ok(())
}

/// Record a failed attempt of sink `sink`'s held batch at `now_ms`.
pub fn failed(
    tx: &Connection,
    sink: &str,
    kind: &str,
    error: &str,
    blocked: bool,
    now_ms: i64,
) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "UPDATE sink_batches SET attempts = attempts + 1, last_kind = ?2, last_error = ?3,
             blocked = ?4, last_attempt_ms = ?5, failing_since_ms = coalesce(failing_since_ms, ?5)
         WHERE sink = ?1",
    )?
    .execute(params![sink, kind, error, blocked, now_ms])?;
    Ok(())
}

/// Forget sink `sink`'s held batch unsent (its consumer was removed: the
/// sink starts again from the first entry the ledger keeps).
pub fn forget(tx: &Connection, sink: &str) -> rusqlite::Result<()> {
    tx.prepare_cached("DELETE FROM sink_batches WHERE sink = ?1")?
        .execute([sink])?;
    Ok(())
}

/// Sink `sink`'s held batch was delivered: its consumer `consumer`'s
/// cursor moves to the batch's last entry and the batch is gone, in the
/// caller's transaction. False if the consumer is not registered (removed
/// meanwhile by an operator): the batch is gone all the same, and the
/// sink registers anew, from the first entry the ledger keeps.
pub fn delivered(
    tx: &Connection,
    sink: &str,
    consumer: &str,
    batch: &Batch,
    now_ms: i64,
) -> rusqlite::Result<bool> {
    tx.prepare_cached("DELETE FROM sink_batches WHERE sink = ?1")?
        .execute([sink])?;
    cursor::ack_at(tx, consumer, batch.last_seq, &batch.last_uuid, now_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    /// A held batch is read back byte for byte; failures are counted on
    /// it; its delivery moves the cursor and removes it in one go.
    #[test]
    fn a_held_batch_is_kept_until_delivered_with_the_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let c = &store.conn;
        let batch = Batch {
            first_seq: 1,
            last_seq: 2,
            last_uuid: "u2".into(),
            entries: 2,
            key: "k".into(),
            format: SinkFormat::Epcis,
            body: b"{}\n".to_vec(),
        };
        cursor::register(c, "sink.inv", 0).unwrap();
        hold(c, "inv", &batch, 5).unwrap();
        failed(c, "inv", "status_5xx", "500", false, 6).unwrap();
        failed(c, "inv", "status_4xx", "400", true, 7).unwrap();
        let h = get(c, "inv").unwrap().unwrap();
        assert_eq!((h.batch, h.held_ms), (batch.clone(), 5));
        assert_eq!(
            (h.state.attempts, h.state.blocked, h.state.failing_since_ms),
            (2, true, Some(6))
        );
        assert_eq!(all(c).unwrap().len(), 1);
        assert!(delivered(c, "inv", "sink.inv", &batch, 8).unwrap());
        assert!(get(c, "inv").unwrap().is_none());
        let lag = &cursor::lags(c).unwrap()[0];
        assert_eq!((lag.acked_ms, lag.behind), (Some(8), 0));
        // Its consumer removed meanwhile: nothing acknowledged, the batch
        // gone all the same (the sink registers anew).
        hold(c, "inv", &batch, 9).unwrap();
        assert!(!delivered(c, "inv", "sink.gone", &batch, 10).unwrap());
        assert!(get(c, "inv").unwrap().is_none());
    }
}
