//! The database's schema and opening one file as a scangate database:
//! the migrations (`migrations.rs`, counted by `PRAGMA user_version`), the
//! checks of a file's header, version and pages, and each connection's
//! settings.

use super::migrations::MIGRATIONS;
use super::{Store, StoreError, classify, connect};
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use std::path::Path;
use std::sync::Arc;

/// `PRAGMA secure_delete` on every writing connection: whatever a write
/// frees (the old copy of a row rewritten by its decision, overflow pages of
/// a long frame) is overwritten with zeros, so raw scan bytes cleared after
/// `[outbox] keep_raw_hours` leave the file (`Store::clear_raw`).
pub(super) const SECURE_DELETE: &str = "ON";

impl Store {
    /// Open the database file `path` ([`Store::open_file_as`]).
    pub(super) fn open_file(path: &Path, read_only: bool) -> Result<Store, StoreError> {
        Store::open_file_as(path, None, read_only, None)
    }

    /// Open `path` read-write as the state directory's writer: an older
    /// schema is migrated, announced and reported, after a copy of the
    /// database is kept beside it if `floor` bytes (`[outbox]
    /// min_free_mb`) stay free after it (`store::upgrade`).
    pub(super) fn open_file_migrating(path: &Path, floor: u64) -> Result<Store, StoreError> {
        Store::open_file_as(path, None, false, Some(floor))
    }

    /// Open `path` (through `uri` if given, read-only): connect, check its
    /// header and schema version, set the connection up, then migrate it
    /// (read-write; keeping a copy first with `floor`, see
    /// [`Store::open_file_migrating`]) or refuse a version that still needs
    /// migrating (read-only).
    pub(super) fn open_file_as(
        path: &Path,
        uri: Option<&str>,
        read_only: bool,
        floor: Option<u64>,
    ) -> Result<Store, StoreError> {
        let conn = open_connection(path, uri, read_only)?;
        let version = check_version(&conn, path, read_only)?;
        configure(&conn, path, read_only)?;
        let mut store = Store::unlocked(conn, path);
        if !read_only {
            store.migrate(version, floor)?;
        } else {
            require_current(path, version)?;
        }
        Ok(store)
    }

    /// A store of `conn` on `path` that holds no lock and runs no
    /// checkpointer.
    fn unlocked(conn: Connection, path: &Path) -> Store {
        Store {
            conn,
            path: path.to_owned(),
            _lock: None,
            _checkpointer: None,
            writers: Arc::default(),
            yields: false,
        }
    }

    /// Open the existing database file `path` read-write beside its writer
    /// (the daemon may be running): no lock, no migration (a file that
    /// still needs one is refused, as read-only commands refuse it), and
    /// `synchronous = NORMAL`: what such a connection writes (a ledger
    /// consumer's cursor) may be lost to a power cut, which only makes
    /// entries come again, and its commit never waits for an fsync while
    /// it holds the write lock the daemon needs.
    pub(super) fn open_file_unlocked(path: &Path) -> Result<Store, StoreError> {
        let conn = super::connect(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
        let version = check_version(&conn, path, true)?;
        configure(&conn, path, true)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(|e| sqlite(path, e))?;
        require_current(path, version)?;
        Ok(Store::unlocked(conn, path))
    }

    /// Apply the migrations after version `from`, each in a transaction
    /// of its own with the version it makes (a cut leaves a version in
    /// between, which the next start migrates on from), announced and
    /// reported when `floor` is given (`store::upgrade`).
    fn migrate(&mut self, from: i64, floor: Option<u64>) -> Result<(), StoreError> {
        let to = MIGRATIONS.len() as i64;
        if from >= to {
            return Ok(());
        }
        let Store { conn, path, .. } = self;
        let err = |e| classify(path, e);
        let migration = super::upgrade::Migration::begin(conn, path, from, to, floor)?;
        if from > 0 {
            check_pages(conn, path)?;
        }
        migration.keep_copy(conn, path, floor)?;
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(from as usize) {
            migration.step(i as i64 + 1);
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(err)?;
            tx.execute_batch(sql).map_err(err)?;
            tx.pragma_update(None, "user_version", (i + 1) as i64)
                .map_err(err)?;
            tx.commit().map_err(err)?;
        }
        migration.done(conn, path)
    }

    /// Read every page of the database file `db` on a connection of its own
    /// (`PRAGMA quick_check`), as read-only commands do when they open it:
    /// O(file size), so the daemon runs it on a thread after start.
    pub fn check_pages(db: &Path) -> Result<(), StoreError> {
        check_pages(&connect(db, OpenFlags::SQLITE_OPEN_READ_ONLY)?, db)
    }
}

/// A connection that does not migrate needs a file of this build's schema
/// version (`version`, not newer: [`check_version`] refused that).
fn require_current(path: &Path, version: i64) -> Result<(), StoreError> {
    let known = MIGRATIONS.len() as i64;
    if version < known {
        return Err(StoreError::OlderSchema {
            path: path.to_owned(),
            found: version,
            known,
        });
    }
    Ok(())
}

/// `PRAGMA quick_check`: read every page; `Corrupt` if anything is wrong.
fn check_pages(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    let check: String = conn
        .query_row("PRAGMA quick_check(1)", [], |r| r.get(0))
        .map_err(|e| classify(path, e))?;
    if check != "ok" {
        return Err(StoreError::Corrupt {
            path: path.to_owned(),
            detail: check,
        });
    }
    Ok(())
}

/// A `StoreError::Sqlite` naming `path` (the connection's settings fail
/// with it, not through [`classify`]).
fn sqlite(path: &Path, source: rusqlite::Error) -> StoreError {
    StoreError::Sqlite {
        path: path.to_owned(),
        source,
    }
}

/// A connection to `path` (through `uri` if given): read-only, or
/// read-write creating the file; it waits up to 5 s for a lock.
fn open_connection(
    path: &Path,
    uri: Option<&str>,
    read_only: bool,
) -> Result<Connection, StoreError> {
    let sql = |source| sqlite(path, source);
    let flags = OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW
        | if read_only {
            OpenFlags::SQLITE_OPEN_READ_ONLY
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
        };
    let checked = super::checked_path(path)?;
    let conn = match uri {
        None => Connection::open_with_flags(checked, flags),
        Some(uri) => Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI),
    }
    .map_err(|e| classify(path, e))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(sql)?;
    Ok(conn)
}

/// The file's schema version, after reading its header and its schema
/// table: a foreign, corrupt or newer file is refused, and so is a new
/// (version 0) file with tables in it, to be written.
fn check_version(conn: &Connection, path: &Path, read_only: bool) -> Result<i64, StoreError> {
    // The first real read of the header: a foreign or corrupt file fails here.
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| classify(path, e))?;
    let known = MIGRATIONS.len() as i64;
    if version > known {
        return Err(StoreError::NewerSchema {
            path: path.to_owned(),
            found: version,
            known,
        });
    }
    // The schema table (page 1 and its tree): cheap, and a file damaged
    // after its header fails here.
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .map_err(|e| classify(path, e))?;
    if version > 0 {
        // Every page (`quick_check`) costs seconds per GB read cold, so
        // nobody waits for it: `run` checks on its own thread after
        // start, `audit verify` checks before the chain
        // (`Store::check_pages`); other read-only commands meet damage in
        // the pages they read. A migration (it writes) checks first, once
        // it has been announced (`Store::migrate`).
    } else if !read_only {
        // A brand-new file must really be empty: never adopt a database
        // that holds someone else's tables.
        if tables > 0 {
            return Err(StoreError::Corrupt {
                path: path.to_owned(),
                detail: "it holds tables but no scangate schema version".into(),
            });
        }
    }
    Ok(version)
}

/// The connection's settings: to write, WAL, `synchronous=FULL` and
/// secure delete; always the page cache, temporary tables in memory, the
/// query planner's stability and `rarray`.
fn configure(conn: &Connection, path: &Path, read_only: bool) -> Result<(), StoreError> {
    let sql = |source| sqlite(path, source);
    if !read_only {
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(sql)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(sql)?;
        conn.pragma_update(None, "secure_delete", SECURE_DELETE)
            .map_err(sql)?;
    }
    // 16 MiB page cache (default 2 MiB): the exact index's pages are hit
    // at random, one per committed scan.
    conn.pragma_update(None, "cache_size", -16384)
        .map_err(sql)?;
    conn.pragma_update(None, "temp_store", "MEMORY")
        .map_err(sql)?;
    // The bundled SQLite has STAT4, which re-parses a statement whenever a
    // parameter compared with an indexed column is rebound (every lookup).
    // The query-planner stability guarantee keeps the prepared plans.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .map_err(sql)?;
    // `rarray(?)`: a claim round in flight is skipped inside the query.
    rusqlite::vtab::array::load_module(conn).map_err(sql)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::DB_FILE;

    #[test]
    fn an_older_database_is_migrated_in_place_and_keeps_its_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(DB_FILE);
        {
            // A database as the first release wrote it: schema 1, one scan.
            let c = Connection::open(&path).unwrap();
            c.execute_batch(MIGRATIONS[0]).unwrap();
            c.pragma_update(None, "user_version", 1).unwrap();
            c.execute(
                "INSERT INTO scans (scan_uuid, scanner, scan_type, quantity, captured_ms,
                     boot_id, boot_ns, clock_synced, raw) VALUES ('u1','s','dispense',1,1,'b',1,1,x'00')",
                [],
            )
            .unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        let version: i64 = store
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, MIGRATIONS.len() as i64);
        let scans: i64 = store
            .conn
            .query_row("SELECT count(*) FROM scans", [], |r| r.get(0))
            .unwrap();
        assert_eq!(scans, 1);
        // A read-only tool refuses a database that still needs migrating.
        drop(store);
        let c = Connection::open(&path).unwrap();
        c.pragma_update(None, "user_version", 1).unwrap();
        drop(c);
        assert!(matches!(
            Store::open_read_only(dir.path()),
            Err(StoreError::OlderSchema { found: 1, .. })
        ));
    }
    /// No write of a scan, a ledger entry or an audit record makes SQLite
    /// build a throw-away index (`OpenEphemeral`, as the scans table's
    /// old CHECK did on every INSERT and UPDATE).
    #[test]
    fn writes_build_no_ephemeral_index() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for sql in [
            "INSERT INTO scans (scan_uuid, scanner, scan_type, quantity, captured_ms, boot_id,
                 boot_ns, clock_synced, raw, symbology, gtin, content_key, state, twin_uuid,
                 decided_ms, window_ms, unserialised, resend, ambiguous)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            "UPDATE scans SET state = ?2, twin_uuid = ?3, decided_ms = ?4, ambiguous = ?5
             WHERE seq = ?1",
            "INSERT INTO ledger (scan_uuid, gateway, scanner, captured_ms, boot_id, boot_ns,
                 clock_synced, scan_type, quantity, gtin, ndc10, lot, serial, expiry, symbology,
                 content_key, key_prefix)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
            "INSERT INTO audit (seq, scan_uuid, record, hash) VALUES (?1, ?2, ?3, ?4)",
        ] {
            let mut q = store.conn.prepare(&format!("EXPLAIN {sql}")).unwrap();
            let mut rows = q.raw_query();
            let mut ops: Vec<String> = Vec::new();
            while let Some(r) = rows.next().unwrap() {
                ops.push(r.get(1).unwrap());
            }
            assert!(
                ops.iter().any(|o| o == "Insert" || o == "IdxInsert"),
                "{ops:?}"
            );
            assert!(!ops.iter().any(|o| o == "OpenEphemeral"), "{sql}: {ops:?}");
        }
    }

    /// Each index of the ledger and the audit trail serves the queries
    /// migration 8 names (the exact lookups: `ledger.rs`).
    #[test]
    fn the_indexes_serve_their_queries() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let plan = |sql: &str| crate::store::query_plan(&store.conn, sql);
        for (sql, index) in [
            (
                "SELECT content_key FROM ledger WHERE captured_ms >> 13 >= 1 >> 13 AND captured_ms >= 1",
                "ledger_wall",
            ),
            (
                "SELECT 1 FROM scans WHERE scan_uuid = x'00'",
                "sqlite_autoindex_scans",
            ),
            (
                "SELECT EXISTS (SELECT 1 FROM ledger WHERE scan_uuid = x'00')",
                "sqlite_autoindex_ledger",
            ),
            (
                "SELECT seq, record FROM audit WHERE scan_uuid = x'00' ORDER BY seq",
                "audit_scan",
            ),
            (
                "SELECT min(seq) FROM audit WHERE scan_uuid = x'00'",
                "audit_scan",
            ),
        ] {
            let p = plan(sql);
            assert!(p.contains(&format!("INDEX {index}")), "{sql}: {p}");
        }
    }
}
