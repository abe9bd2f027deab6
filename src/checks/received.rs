//! Serialised items received at this gateway (the `serials_received`
//! table, migration 13): the first `receive` read of each GTIN + serial,
//! so a later one beyond the echo window is told `suspect`
//! ([`crate::model::Alert::Suspect`]). Written in the transaction that
//! commits the read; kept `[checks] serial_retention_days` from the first
//! receipt, then removed by the sweeper ([`prune`]). With a facility
//! store the facility's own record decides instead
//! (`facility::received`), so every gateway of the facility sees every
//! receipt.
//!
//! About 120 bytes a row with its time index (docs/benchmarks.md).

use crate::model::{Alert, AlertFound, Received};
use crate::store::packed::{Unpacked, packed};
use rusqlite::{Connection, OptionalExtension, params};

/// A serialised item a `receive` read committed.
#[derive(Debug, Clone, Copy)]
pub struct Receipt<'a> {
    /// GTIN-14.
    pub gtin: &'a str,
    /// Serial number (AI 21).
    pub serial: &'a str,
    /// The read's scan UUID.
    pub scan_uuid: &'a str,
    /// Its capture time (Unix ms).
    pub at_ms: i64,
    /// The scanner that read it.
    pub scanner: &'a str,
}

/// Keeps receipts in one deciding transaction, through one prepared
/// statement (as `checks::open::Raiser`: a lookup in rusqlite's
/// statement cache per read costs a few percent).
pub struct Keeper<'t> {
    tx: &'t Connection,
    insert: Option<rusqlite::CachedStatement<'t>>,
}

impl<'t> Keeper<'t> {
    /// Keep receipts inside `tx`.
    pub fn new(tx: &'t Connection) -> Keeper<'t> {
        Keeper { tx, insert: None }
    }

    /// Keep `receipt` as its item's first receipt at `gateway`, unless
    /// there is one: then that one (the read's own, for a read written
    /// again, which [`Received::makes_suspect`] tells apart).
    pub fn receive(
        &mut self,
        gateway: &str,
        receipt: &Receipt<'_>,
    ) -> rusqlite::Result<Option<Received>> {
        let added = crate::store::held(
            &mut self.insert,
            self.tx,
            "INSERT OR IGNORE INTO serials_received
                 (gtin, serial, at_ms, gateway, scanner, scan_uuid)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?
        .execute(params![
            receipt.gtin,
            receipt.serial,
            receipt.at_ms,
            gateway,
            receipt.scanner,
            packed(receipt.scan_uuid),
        ])?;
        if added == 1 {
            return Ok(None);
        }
        self.tx
            .prepare_cached(
                "SELECT scan_uuid, at_ms, gateway, scanner FROM serials_received
                 WHERE gtin = ?1 AND serial = ?2",
            )?
            .query_row(params![receipt.gtin, receipt.serial], |r| {
                Ok(Received {
                    scan_uuid: r.get::<_, Unpacked>(0)?.0,
                    at_ms: r.get(1)?,
                    gateway: r.get(2)?,
                    scanner: r.get(3)?,
                })
            })
            .optional()
    }
}

/// The alert of a read that `first` received before.
pub fn alert(first: &Received) -> AlertFound {
    AlertFound {
        first_received_at: Some(crate::capture::clock::rfc3339_ms(first.at_ms)),
        first_received_gateway: Some(first.gateway.clone()),
        first_received_scanner: Some(first.scanner.clone()),
        first_received_scan: Some(first.scan_uuid.clone()),
        ..AlertFound::of(Alert::Suspect)
    }
}

/// Remove up to `limit` receipts first made before `before_ms`: how many.
pub fn prune(tx: &Connection, before_ms: i64, limit: usize) -> rusqlite::Result<usize> {
    tx.prepare_cached(
        "DELETE FROM serials_received WHERE (gtin, serial) IN
             (SELECT gtin, serial FROM serials_received WHERE at_ms < ?1 LIMIT ?2)",
    )?
    .execute(params![before_ms, limit as i64])
}

/// Receipts kept (for `status` and the measurements).
pub fn count(conn: &Connection) -> rusqlite::Result<u64> {
    conn.query_row("SELECT count(*) FROM serials_received", [], |r| {
        r.get::<_, i64>(0)
    })
    .map(i64::unsigned_abs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> (tempfile::TempDir, crate::store::Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(dir.path()).unwrap();
        (dir, store)
    }

    fn receipt<'a>(uuid: &'a str, at_ms: i64) -> Receipt<'a> {
        Receipt {
            gtin: "00300676382302",
            serial: "SN0001",
            scan_uuid: uuid,
            at_ms,
            scanner: "receiving-1",
        }
    }

    #[test]
    fn the_first_receipt_is_kept_and_named_to_later_ones() {
        let (_dir, store) = db();
        let conn = &store.conn;
        let first = "019ae4c4-0d52-7c41-9f8e-2f0b7d1e6a30";
        let later = "019ae4c4-0d52-7c41-9f8e-2f0b7d1e6a31";
        assert_eq!(
            Keeper::new(conn)
                .receive("gw-1", &receipt(first, 1_000))
                .unwrap(),
            None
        );
        let named = Keeper::new(conn)
            .receive("gw-2", &receipt(later, 900_000))
            .unwrap()
            .unwrap();
        assert_eq!(named.scan_uuid, first);
        assert_eq!((named.at_ms, named.gateway.as_str()), (1_000, "gw-1"));
        assert!(named.makes_suspect(later, 900_000, 2_000));
        // The read itself, written again: not suspect.
        let again = Keeper::new(conn)
            .receive("gw-1", &receipt(first, 1_000))
            .unwrap()
            .unwrap();
        assert!(!again.makes_suspect(first, 1_000, 2_000));
        // Another read within the window: the same pick heard twice.
        assert!(!named.makes_suspect(later, 2_500, 2_000));
        // Another serial: a first receipt of its own (the control).
        let other = Receipt {
            serial: "SN0002",
            ..receipt(later, 900_000)
        };
        assert_eq!(Keeper::new(conn).receive("gw-1", &other).unwrap(), None);
        assert_eq!(count(conn).unwrap(), 2);
    }

    #[test]
    fn receipts_older_than_the_retention_are_pruned_in_chunks() {
        let (_dir, store) = db();
        let conn = &store.conn;
        for i in 0..5 {
            let uuid = format!("019ae4c4-0d52-7c41-9f8e-2f0b7d1e6a3{i}");
            let r = Receipt {
                serial: &format!("SN{i}"),
                ..receipt(&uuid, i * 1_000)
            };
            Keeper::new(conn).receive("gw-1", &r).unwrap();
        }
        assert_eq!(prune(conn, 3_000, 2).unwrap(), 2);
        assert_eq!(prune(conn, 3_000, 2).unwrap(), 1);
        assert_eq!(prune(conn, 3_000, 2).unwrap(), 0);
        assert_eq!(count(conn).unwrap(), 2);
    }
}
