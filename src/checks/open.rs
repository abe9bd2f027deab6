//! Alerts staff have not acknowledged yet (the `alerts_open` table,
//! migration 12): one row per alerted read, written in the transaction
//! that records the read's first decision, removed by an ACKNOWLEDGE
//! control label read on the same scanner ([`acknowledge`]). What is
//! left is what `scangate_alerts_unacknowledged{scanner}` counts. Rows of
//! a scanner whose staff never acknowledge stay (about 60 bytes each, at
//! the rate alerts come): the metric is there to show it.

use crate::model::Alert;
use crate::store::packed::{Unpacked, packed};
use rusqlite::{Connection, params};

/// Keeps alerted reads open in one deciding transaction, through one
/// prepared statement (looked up once, not per read: a lookup in
/// rusqlite's statement cache per scan costs a few percent).
pub struct Raiser<'t> {
    tx: &'t Connection,
    insert: Option<rusqlite::CachedStatement<'t>>,
}

impl<'t> Raiser<'t> {
    /// Raise alerts inside `tx`.
    pub fn new(tx: &'t Connection) -> Raiser<'t> {
        Raiser { tx, insert: None }
    }

    /// Keep read `scan_uuid` of `scanner`, alerted `kind` at `at_ms`,
    /// open (once: a read that waited and then committed is one alert).
    pub fn raise(
        &mut self,
        scan_uuid: &str,
        scanner: &str,
        kind: Alert,
        at_ms: i64,
    ) -> rusqlite::Result<()> {
        crate::store::held(
            &mut self.insert,
            self.tx,
            "INSERT OR IGNORE INTO alerts_open (scan_uuid, scanner, kind, at_ms)
             VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![packed(scan_uuid), scanner, kind.as_str(), at_ms])?;
        Ok(())
    }
}

/// One alert an ACKNOWLEDGE read closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acknowledged {
    /// The alerted read.
    pub scan_uuid: String,
    /// What it was told.
    pub kind: String,
}

/// Close every open alert of `scanner`: the alerts, oldest first.
pub fn acknowledge(tx: &Connection, scanner: &str) -> rusqlite::Result<Vec<Acknowledged>> {
    let closed = tx
        .prepare_cached(
            "SELECT scan_uuid, kind FROM alerts_open WHERE scanner = ?1
             ORDER BY at_ms, scan_uuid",
        )?
        .query_map([scanner], |r| {
            Ok(Acknowledged {
                scan_uuid: r.get::<_, Unpacked>(0)?.0,
                kind: r.get(1)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    if !closed.is_empty() {
        tx.prepare_cached("DELETE FROM alerts_open WHERE scanner = ?1")?
            .execute([scanner])?;
    }
    Ok(closed)
}

/// Open alerts per scanner (at start, for the metric and `status`).
pub fn counts(conn: &Connection) -> rusqlite::Result<Vec<(String, u64)>> {
    conn.prepare("SELECT scanner, count(*) FROM alerts_open GROUP BY scanner")?
        .query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)?.unsigned_abs())))?
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[test]
    fn an_alert_is_open_once_until_its_scanner_acknowledges() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let c = &store.conn;
        let a = "019ae4c4-0d52-7c41-9f8e-2f0b7d1e6a30";
        let b = "019ae4c4-0d52-7c41-9f8e-2f0b7d1e6a31";
        let mut raiser = Raiser::new(c);
        raiser.raise(a, "counter-1", Alert::Expired, 2).unwrap();
        // The same read again (it waited, then committed): still one.
        raiser.raise(a, "counter-1", Alert::Expired, 3).unwrap();
        raiser.raise(b, "counter-2", Alert::Recalled, 1).unwrap();
        drop(raiser);
        assert_eq!(
            counts(c).unwrap(),
            [("counter-1".to_string(), 1), ("counter-2".to_string(), 1)]
        );
        let closed = acknowledge(c, "counter-1").unwrap();
        assert_eq!(
            closed,
            [Acknowledged {
                scan_uuid: a.into(),
                kind: "expired".into()
            }]
        );
        assert_eq!(acknowledge(c, "counter-1").unwrap(), []);
        assert_eq!(counts(c).unwrap(), [("counter-2".to_string(), 1)]);
    }
}
