//! The gateway's SQLite database: outbox, ledger, audit trail and metadata in
//! one file, so a decision, its ledger entry and its audit record commit in one
//! transaction (invariant 6) and one fsync.
//!
//! rusqlite is blocking: the daemon owns the [`Store`] on a dedicated thread
//! (see `daemon.rs`) and never touches it from the async runtime.

use checkpoint::{Checkpointer, WRITER_AUTOCHECKPOINT};
use nix::fcntl::{Flock, FlockArg};
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use turn::{Turn, TurnGuard};

mod checkpoint;
pub mod identity;
pub mod space;
mod turn;

/// File name of the database inside the state directory.
pub const DB_FILE: &str = "scangate.db";

/// Schema migrations, applied in order; `PRAGMA user_version` counts them.
/// Never edit a shipped migration: append a new one.
const MIGRATIONS: &[&str] = &[
    // 1: the spine.
    r#"
    CREATE TABLE scans (
        seq           INTEGER PRIMARY KEY,
        scan_uuid     TEXT    NOT NULL UNIQUE,
        scanner       TEXT    NOT NULL,
        scan_type     TEXT    NOT NULL,
        quantity      INTEGER NOT NULL,
        captured_ms   INTEGER NOT NULL,
        boot_id       TEXT    NOT NULL,
        boot_ns       INTEGER NOT NULL,
        clock_synced  INTEGER NOT NULL,
        raw           BLOB    NOT NULL,
        symbology     TEXT,
        gtin          TEXT,
        ndc10         TEXT,
        lot           TEXT,
        serial        TEXT,
        expiry        TEXT,
        content_key   TEXT,
        reject_reason TEXT,
        state         TEXT    NOT NULL DEFAULT 'pending'
                      CHECK (state IN ('pending','unresolved','committed','suppressed','rejected')),
        twin_uuid     TEXT,
        decided_ms    INTEGER
    );
    -- Partial: only undecided rows are indexed, so the index stays tiny.
    -- Queries must say `state = 'pending'` literally for SQLite to use it.
    CREATE INDEX scans_pending ON scans (captured_ms, boot_ns, scan_uuid)
        WHERE state = 'pending';
    -- Echoes by the committed scan they name (for `audit trace`).
    CREATE INDEX scans_twin ON scans (twin_uuid) WHERE twin_uuid IS NOT NULL;
    CREATE TABLE ledger (
        seq           INTEGER PRIMARY KEY,
        scan_uuid     TEXT    NOT NULL UNIQUE,
        gateway       TEXT    NOT NULL,
        scanner       TEXT    NOT NULL,
        captured_ms   INTEGER NOT NULL,
        boot_id       TEXT    NOT NULL,
        boot_ns       INTEGER NOT NULL,
        clock_synced  INTEGER NOT NULL,
        scan_type     TEXT    NOT NULL,
        quantity      INTEGER NOT NULL,
        gtin          TEXT,
        ndc10         TEXT,
        lot           TEXT,
        serial        TEXT,
        expiry        TEXT,
        symbology     TEXT    NOT NULL,
        content_key   TEXT    NOT NULL,
        key_prefix    INTEGER NOT NULL
    );
    -- The exact index: (8-byte content-key prefix, wall time). Content keys
    -- are uniformly random, so every insert lands on a random index page; a
    -- small key keeps the index in the page cache, and the time column keeps
    -- a lookup for a often re-dispensed label from reading all its history.
    CREATE INDEX ledger_key ON ledger (key_prefix, captured_ms);
    -- Per boot, the range of (wall clock - boot clock) of committed rows:
    -- how far the wall clock was stepped (see gate/clock_steps.rs).
    CREATE TABLE boot_offsets (
        boot_id       TEXT PRIMARY KEY,
        min_offset    INTEGER NOT NULL,
        max_offset    INTEGER NOT NULL
    );
    CREATE INDEX ledger_time ON ledger (captured_ms);
    CREATE TABLE audit (
        seq           INTEGER PRIMARY KEY,
        scan_uuid     TEXT    NOT NULL,
        content_key   TEXT,
        record        TEXT    NOT NULL,
        prev_hash     TEXT    NOT NULL,
        hash          TEXT    NOT NULL
    );
    CREATE INDEX audit_scan ON audit (scan_uuid);
    CREATE TABLE meta (
        key           TEXT PRIMARY KEY,
        value         TEXT NOT NULL
    );
    "#,
    // 2: the facility store's backlog (scans waiting for Redis), by capture time.
    r#"
    CREATE INDEX scans_unresolved ON scans (captured_ms, boot_ns, scan_uuid)
        WHERE state = 'unresolved';
    "#,
    // 3: the exact index, time bucket first. `ledger_key` led with the random
    // content-key prefix, so every commit wrote one random index page (~8 KB
    // of WAL and checkpoint writes per scan, most of the I/O of a replay).
    // Led by a ~8 s bucket of the time it is searched by, inserts land on
    // the few pages of the current bucket; a lookup seeks one or two buckets.
    // Same-boot twins are found on the boot clock (`ledger_boot`, 2^33 ns
    // buckets), others on the wall clock (`ledger_wall`, 2^13 ms buckets).
    // Queries must repeat the bucket expressions exactly.
    r#"
    CREATE INDEX ledger_wall ON ledger (captured_ms >> 13, key_prefix, captured_ms);
    CREATE INDEX ledger_boot ON ledger (boot_id, boot_ns >> 33, key_prefix, boot_ns);
    DROP INDEX ledger_key;
    "#,
    // 4: backlog scans stamped on a wall clock the kernel did not call
    // synchronised (no trusted place in capture order), by content key: a new scan with the same key
    // must not be claimed ahead of them (`Gate::pick`: a scan is held back behind them).
    // Tiny: only such scans are in it.
    r#"
    CREATE INDEX scans_unsynced ON scans (content_key)
        WHERE state = 'unresolved' AND clock_synced = 0;
    "#,
    // 5: the facility clock as measured against each boot's clock
    // (gate/facility_time.rs): captures are mapped to facility time through
    // them, also after a restart.
    r#"
    CREATE TABLE clock_samples (
        boot_id        TEXT    NOT NULL,
        boot_ms        INTEGER NOT NULL,
        boot_offset_us INTEGER NOT NULL,
        bound_us       INTEGER NOT NULL,
        at_ms          INTEGER NOT NULL,
        PRIMARY KEY (boot_id, boot_ms)
    ) WITHOUT ROWID;
    "#,
    // 6: retention (audit/archive.rs): the archives `audit prune` verified
    // against this database and pruned by, owned by the audit stage.
    r#"
    CREATE TABLE audit_archives (
        content_sha256 TEXT    PRIMARY KEY,
        first_seq      INTEGER NOT NULL,
        last_seq       INTEGER NOT NULL,
        prev_hash      TEXT    NOT NULL,
        last_hash      TEXT    NOT NULL,
        records        INTEGER NOT NULL,
        ledger_entries INTEGER NOT NULL,
        until          TEXT    NOT NULL,
        file           TEXT    NOT NULL,
        registered_ms  INTEGER NOT NULL
    );
    "#,
];

/// Why the database could not be used. Each says which file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The state directory cannot be created or written.
    #[error(
        "state directory {dir}: {source}. Fix: create it writable for the service user, or set [gateway] state_dir"
    )]
    StateDir {
        /// The directory.
        dir: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not a usable SQLite database (corrupt, truncated, foreign).
    #[error(
        "database {path} is unreadable or corrupt ({detail}); it was left untouched. Fix: move it aside for investigation and restore a backup — scangate never overwrites it"
    )]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        detail: String,
    },
    /// The database was written by a newer scangate.
    #[error(
        "database {path} has schema version {found}, newer than this scangate understands ({known}). Fix: run the newer scangate, or restore a backup"
    )]
    NewerSchema {
        /// The database file.
        path: PathBuf,
        /// Its `user_version`.
        found: i64,
        /// The newest version this build knows.
        known: i64,
    },
    /// A read-only command met a database that still needs migrating.
    #[error(
        "database {path} has schema version {found}; this scangate reads version {known}. Fix: start `scangate run` once so it migrates the database"
    )]
    OlderSchema {
        /// The database file.
        path: PathBuf,
        /// Its `user_version`.
        found: i64,
        /// The version this build writes.
        known: i64,
    },
    /// A read-only user met a write-ahead log left by a daemon that did not
    /// stop cleanly: reading it needs write access.
    #[error(
        "database {path} has a write-ahead log left by a scangate that did not stop cleanly, and this user may not write the state directory, which reading it needs. Fix: start scangate (it takes the log in), or run this command as the service user"
    )]
    LeftoverWal {
        /// The database file.
        path: PathBuf,
    },
    /// Another scangate process is writing to this state directory.
    #[error(
        "state directory {dir} is in use by another scangate (pid {holder}). Fix: stop it first (systemctl stop scangate), or give this instance its own [gateway] state_dir"
    )]
    Locked {
        /// The directory.
        dir: PathBuf,
        /// Pid written by the holder.
        holder: String,
    },
    /// The database of this state directory is gone (missing, or emptied),
    /// while the state directory says one was here: refused, never
    /// replaced by a new one.
    #[error(
        "database {db} {what}, but {evidence}: its ledger and audit trail are not here, and scangate will not start a new database in their place. Fix: stop scangate and restore {db} from a backup, or, to start over with an empty ledger and a new audit chain, run `scangate state reset --confirm {confirm}` (audited as the first record of the new chain)"
    )]
    Lost {
        /// The database file.
        db: PathBuf,
        /// How it is gone.
        what: String,
        /// What says a database was here.
        evidence: String,
        /// What `state reset --confirm` takes.
        confirm: String,
    },
    /// The database holds another state's identity: it was replaced (by
    /// another gateway's database, or another state's).
    #[error(
        "database {db} belongs to state {found}, but this state directory is state {expected} ({id_file}): the database was replaced by another one. Fix: stop scangate and restore this state's own database from a backup, or run `scangate state reset --confirm {expected}` to start over with an empty ledger and a new audit chain (the database there is moved aside, not deleted)"
    )]
    Replaced {
        /// The database file.
        db: PathBuf,
        /// The identity file.
        id_file: PathBuf,
        /// The identity in the file.
        expected: String,
        /// The identity in the database.
        found: String,
    },
    /// The identity file cannot be read or written.
    #[error(
        "state identity file {path}: {detail}. Fix: restore it from the backup of this state directory (it must match scangate.db); scangate does not recreate it beside an existing database with another identity"
    )]
    IdFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// Any other SQLite failure.
    #[error("database {path}: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The SQLite error.
        source: rusqlite::Error,
    },
}

/// The open database.
pub struct Store {
    pub(crate) conn: Connection,
    pub(crate) path: PathBuf,
    /// Held while a writer has the state directory: two daemons on one
    /// database would each trust their own Bloom filter and double-commit.
    /// Shared with every [`Store::companion`], so it is held until the
    /// last writing connection is gone (the claimer's and the sweeper's may
    /// outlive the outbox writer's at shutdown).
    _lock: Option<Arc<Flock<std::fs::File>>>,
    /// Copies the WAL into the database off the writer's path (writers only).
    _checkpointer: Option<Checkpointer>,
    /// Shared with the [`Store::companion`]: see [`Store::write`].
    pub(crate) writers: Arc<Turn>,
    /// This connection's writes give way to the others' ([`Store::yielding`]).
    yields: bool,
}

/// A write transaction (`BEGIN IMMEDIATE`) holding the writers' turn
/// ([`Store::write`]); the stages' statements run on it (it derefs to the
/// connection). Dropped without [`Write::commit`], it rolls back; the turn
/// is released after the transaction has ended (field order).
pub struct Write<'s> {
    /// The transaction.
    pub(crate) tx: rusqlite::Transaction<'s>,
    path: &'s Path,
    _turn: TurnGuard<'s>,
}

impl Write<'_> {
    /// A SQLite error, named with the database's path.
    pub fn err(&self, e: rusqlite::Error) -> StoreError {
        classify(self.path, e)
    }

    /// Commit (one fsync), then release the turn.
    pub fn commit(self) -> Result<(), StoreError> {
        let path = self.path;
        self.tx.commit().map_err(|e| classify(path, e))
    }
}

impl std::ops::Deref for Write<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        &self.tx
    }
}

/// A read transaction ([`Store::read`]): every statement on it sees one
/// snapshot of the database. Ended when dropped.
pub struct Read<'s> {
    tx: rusqlite::Transaction<'s>,
}

impl std::ops::Deref for Read<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        &self.tx
    }
}

/// `PRAGMA secure_delete` on every writing connection: whatever a write
/// frees (the old copy of a row rewritten by its decision, overflow pages of
/// a long frame) is overwritten with zeros, so raw scan bytes cleared after
/// `[outbox] keep_raw_hours` leave the file (`Store::clear_raw`).
const SECURE_DELETE: &str = "ON";

/// File in the state directory that a writing scangate holds locked.
pub const LOCK_FILE: &str = "scangate.lock";

fn lock_state_dir(dir: &Path) -> Result<Flock<std::fs::File>, StoreError> {
    use std::io::{Read, Seek, Write};
    let path = dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|source| StoreError::StateDir {
            dir: dir.to_owned(),
            source,
        })?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(mut lock) => {
            let _ = lock.set_len(0);
            let _ = lock.rewind();
            let _ = writeln!(lock, "{}", std::process::id());
            Ok(lock)
        }
        Err((mut file, _)) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            Err(StoreError::Locked {
                dir: dir.to_owned(),
                holder: holder.trim().to_string(),
            })
        }
    }
}

impl Store {
    /// Open (creating if absent) the database in `state_dir`, check it and
    /// migrate it. An existing file that is not a healthy scangate database is
    /// refused, never recreated.
    pub fn open(state_dir: &Path) -> Result<Store, StoreError> {
        std::fs::create_dir_all(state_dir).map_err(|source| StoreError::StateDir {
            dir: state_dir.to_owned(),
            source,
        })?;
        // Probe writability up front so the message names the directory, not
        // a later "unable to open database file".
        tempfile::tempfile_in(state_dir).map_err(|source| StoreError::StateDir {
            dir: state_dir.to_owned(),
            source,
        })?;
        let had_lock = state_dir.join(LOCK_FILE).exists();
        let lock = lock_state_dir(state_dir)?;
        let path = state_dir.join(DB_FILE);
        let id_file = identity::read(state_dir)?;
        let found = identity::inspect(&path)?;
        identity::check(state_dir, id_file.as_ref(), &found, had_lock)?;
        let mut store = Store::open_file(&path, false)?;
        store._lock = Some(Arc::new(lock));
        store.adopt_identity(state_dir, id_file)?;
        store
            .conn
            .pragma_update(None, "wal_autocheckpoint", WRITER_AUTOCHECKPOINT)
            .map_err(|e| store.err_at(e))?;
        store._checkpointer = Some(Checkpointer::spawn(&path)?);
        Ok(store)
    }

    /// Give the database its identity, or keep the one it has, and write
    /// the identity file from it (first start; a database from before
    /// identities; a lost identity file). `check` has refused a mismatch.
    fn adopt_identity(
        &mut self,
        state_dir: &Path,
        id_file: Option<identity::StateId>,
    ) -> Result<(), StoreError> {
        let in_db = self.meta(identity::META_KEY)?;
        let head = self
            .meta(identity::AUDIT_HEAD_KEY)?
            .as_deref()
            .and_then(identity::Head::parse);
        let mut id = id_file.clone().unwrap_or_default();
        match &in_db {
            Some(db_id) => id.id = db_id.clone(),
            None => {
                if id_file.is_some() {
                    crate::events::StateIdentityAdopted {
                        db: &self.path,
                        state_id: &id.id,
                    }
                    .emit();
                }
                let w = self.write()?;
                put_meta(&w, identity::META_KEY, &id.id).map_err(|e| w.err(e))?;
                w.commit()?;
            }
        }
        // The database's head moves the anchor only forward; a head behind
        // it stays for `audit verify` to report.
        if head
            .as_ref()
            .is_some_and(|h| id.head.as_ref().is_none_or(|a| h.seq > a.seq))
        {
            id.head = head;
        }
        if id_file.as_ref() != Some(&id) {
            identity::write(state_dir, &id)?;
        }
        Ok(())
    }

    /// This state's identity (the database's `meta` `state_id`).
    pub fn state_id(&self) -> Result<Option<String>, StoreError> {
        self.meta(identity::META_KEY)
    }

    /// A second read-write connection to this (already checked, migrated
    /// and locked) database, for a facility claimer lane or the sweeper.
    /// The writers take turns (`Store::write`); each transaction is short.
    pub fn companion(&self) -> Result<Store, StoreError> {
        let path = &self.path;
        let err = |e| classify(path, e);
        let conn = connect(path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(err)?;
        conn.pragma_update(None, "secure_delete", SECURE_DELETE)
            .map_err(err)?;
        // The claimer does most of the writing in facility mode: the same
        // cache as the writer, and checkpoints left to the checkpointer.
        conn.pragma_update(None, "cache_size", -16384)
            .map_err(err)?;
        conn.pragma_update(None, "wal_autocheckpoint", WRITER_AUTOCHECKPOINT)
            .map_err(err)?;
        conn.pragma_update(None, "temp_store", "MEMORY")
            .map_err(err)?;
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
            .map_err(err)?;
        rusqlite::vtab::array::load_module(&conn).map_err(err)?;
        Ok(Store {
            conn,
            path: path.clone(),
            _lock: self._lock.clone(),
            _checkpointer: None,
            writers: Arc::clone(&self.writers),
            yields: false,
        })
    }

    /// Let this connection's writes give way: it takes the writers' turn
    /// only while no other writer waits for it (background work: the
    /// replay of a backlog, the raw sweeper). See `Turn`.
    pub fn yielding(mut self) -> Store {
        self.yields = true;
        self
    }

    /// Open an existing database read-only (for `ledger export`, `audit …`,
    /// `status`). A state directory whose database was lost is refused
    /// ([`StoreError::Lost`], [`StoreError::Replaced`]). Never writes, also
    /// for a user who may only read the state directory (a member of the
    /// service's group): while the daemon runs, its write-ahead log and
    /// shared-memory index are read as they are; while it is stopped (it
    /// leaves no log behind: the database file holds everything) SQLite
    /// could not create them, so the file is read as immutable.
    pub fn open_read_only(state_dir: &Path) -> Result<Store, StoreError> {
        let path = state_dir.join(DB_FILE);
        let id_file = identity::read(state_dir)?;
        let found = identity::inspect(&path)?;
        let had_lock = state_dir.join(LOCK_FILE).exists();
        identity::check(state_dir, id_file.as_ref(), &found, had_lock)?;
        if !path.exists() {
            return Err(StoreError::StateDir {
                dir: state_dir.to_owned(),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!(
                        "no database {DB_FILE} here (has `scangate run` ever run with this config?)"
                    ),
                ),
            });
        }
        match Store::open_file(&path, true) {
            Err(StoreError::Sqlite { source, .. })
                if matches!(
                    source.sqlite_error_code(),
                    Some(rusqlite::ffi::ErrorCode::ReadOnly | rusqlite::ffi::ErrorCode::CannotOpen)
                ) && !wal_of(&path).exists() =>
            {
                Store::open_immutable(&path)
            }
            Err(StoreError::Sqlite { source, .. })
                if matches!(
                    source.sqlite_error_code(),
                    Some(rusqlite::ffi::ErrorCode::ReadOnly | rusqlite::ffi::ErrorCode::CannotOpen)
                ) && !is_running(state_dir) =>
            {
                Err(StoreError::LeftoverWal { path })
            }
            opened => opened,
        }
    }

    /// [`Store::open_file`] read-only through an `immutable=1` URI: SQLite
    /// neither locks nor looks for a write-ahead log.
    fn open_immutable(path: &Path) -> Result<Store, StoreError> {
        use std::fmt::Write;
        let mut uri = String::from("file:");
        for b in path.as_os_str().as_encoded_bytes() {
            match b {
                b'/' | b'-' | b'_' | b'.' | b'~' => uri.push(*b as char),
                b if b.is_ascii_alphanumeric() => uri.push(*b as char),
                b => {
                    let _ = write!(uri, "%{b:02X}");
                }
            }
        }
        uri.push_str("?immutable=1");
        Store::open_file_as(path, Some(&uri), true)
    }

    fn open_file(path: &Path, read_only: bool) -> Result<Store, StoreError> {
        Store::open_file_as(path, None, read_only)
    }

    /// Open `path` (through `uri` if given, read-only).
    fn open_file_as(path: &Path, uri: Option<&str>, read_only: bool) -> Result<Store, StoreError> {
        let sql = |source| StoreError::Sqlite {
            path: path.to_owned(),
            source,
        };
        let flags = if read_only {
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
        };
        let conn = match uri {
            None => Connection::open_with_flags(path, flags),
            Some(uri) => Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI),
        }
        .map_err(|e| classify(path, e))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(sql)?;
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
            // the pages they read. A migration (it writes) checks first.
            if !read_only && version < known {
                check_pages(&conn, path)?;
            }
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
        rusqlite::vtab::array::load_module(&conn).map_err(sql)?;
        let mut store = Store {
            conn,
            path: path.to_owned(),
            _lock: None,
            _checkpointer: None,
            writers: Arc::default(),
            yields: false,
        };
        if !read_only {
            store.migrate(version)?;
        } else if version < known {
            return Err(StoreError::OlderSchema {
                path: path.to_owned(),
                found: version,
                known,
            });
        }
        Ok(store)
    }

    fn migrate(&mut self, from: i64) -> Result<(), StoreError> {
        let Store { conn, path, .. } = self;
        let err = |e| classify(path, e);
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(from as usize) {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(err)?;
            tx.execute_batch(sql).map_err(err)?;
            tx.pragma_update(None, "user_version", (i + 1) as i64)
                .map_err(err)?;
            tx.commit().map_err(err)?;
        }
        Ok(())
    }

    /// Read every page of the database file `db` on a connection of its own
    /// (`PRAGMA quick_check`), as read-only commands do when they open it:
    /// O(file size), so the daemon runs it on a thread after start.
    pub fn check_pages(db: &Path) -> Result<(), StoreError> {
        check_pages(&connect(db, OpenFlags::SQLITE_OPEN_READ_ONLY)?, db)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Begin a read transaction: the statements run on it see one snapshot
    /// (from its first read on), whatever the other connections commit
    /// meanwhile.
    pub fn read(&self) -> Result<Read<'_>, StoreError> {
        let tx = self
            .conn
            .unchecked_transaction()
            .map_err(|e| self.err_at(e))?;
        Ok(Read { tx })
    }

    /// Begin a write transaction, taking the in-process writers' turn
    /// first. The daemon's writing connections (outbox writer, facility
    /// claimer lanes, raw sweeper) share one turn, so a waiting thread is
    /// woken the moment another commits — SQLite's own busy handler would
    /// poll the file lock with sleeps of up to 100 ms.
    pub fn write(&mut self) -> Result<Write<'_>, StoreError> {
        let Store {
            conn,
            path,
            writers,
            yields,
            ..
        } = self;
        let turn = writers.take(*yields);
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| classify(path, e))?;
        Ok(Write {
            tx,
            path,
            _turn: turn,
        })
    }

    /// Copy the whole WAL into the database and truncate it to zero bytes,
    /// if no reader is on an older snapshot right now (else `false`: it is
    /// not waited for). Taken in the writers' turn, so neither writer waits
    /// on SQLite's busy handler meanwhile. Old page images in the WAL hold
    /// bytes that were since overwritten in the database.
    pub fn truncate_wal(&self) -> Result<bool, StoreError> {
        let _turn = self.writers.take(self.yields);
        let conn = &self.conn;
        let err = |e| self.err_at(e);
        conn.busy_timeout(std::time::Duration::ZERO).map_err(err)?;
        let busy = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            r.get::<_, i64>(0)
        });
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(err)?;
        match busy {
            Ok(busy) => Ok(busy == 0),
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy) => Ok(false),
            Err(e) => Err(err(e)),
        }
    }

    /// Wrap a SQLite error with this database's path.
    pub fn err_at(&self, source: rusqlite::Error) -> StoreError {
        classify(&self.path, source)
    }

    /// Copy the whole WAL into the database now and truncate it (the
    /// benchmark does this between its phases so they do not overlap).
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        self.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .map_err(|e| self.err_at(e))
    }

    /// Read a metadata value.
    pub fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        get_meta(&self.conn, key).map_err(|e| self.err_at(e))
    }

    /// Set a metadata value, in its own small transaction.
    pub fn set_meta(&mut self, key: &str, value: &str) -> Result<(), StoreError> {
        let w = self.write()?;
        put_meta(&w.tx, key, value).map_err(|e| w.err(e))?;
        w.commit()
    }

    /// A `meta` value written by [`Store::set_meta_json`] (`None` if absent
    /// or unreadable).
    pub fn meta_json<T: serde::de::DeserializeOwned>(
        &self,
        key: &str,
    ) -> Result<Option<T>, StoreError> {
        Ok(self.meta(key)?.and_then(|v| serde_json::from_str(&v).ok()))
    }

    /// Write `value` as JSON under `key` in `meta`, in its own small
    /// transaction.
    pub fn set_meta_json(
        &mut self,
        key: &str,
        value: &impl serde::Serialize,
    ) -> Result<(), StoreError> {
        let value = serde_json::to_string(value).expect("meta values serialise");
        self.set_meta(key, &value)
    }
}

/// Read a metadata value on `conn` (inside a transaction, its snapshot).
pub fn get_meta(conn: &Connection, key: &str) -> rusqlite::Result<Option<String>> {
    use rusqlite::OptionalExtension;
    conn.prepare_cached("SELECT value FROM meta WHERE key = ?1")?
        .query_row([key], |r| r.get(0))
        .optional()
}

/// Set a metadata value inside `tx`.
pub fn put_meta(tx: &Connection, key: &str, value: &str) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT INTO meta (key, value) VALUES (?1, ?2)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    )?
    .execute([key, value])?;
    Ok(())
}

/// A connection to the existing database `db` (`flags`: read-only or
/// read-write) that waits up to 5 s for a lock.
pub(crate) fn connect(db: &Path, flags: OpenFlags) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(db, flags | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(|e| classify(db, e))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(|e| classify(db, e))?;
    Ok(conn)
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

/// Whether a scangate holds `state_dir`'s lock, read from `/proc/locks`
/// (taking a lock to find out could make a daemon starting at that moment
/// fail). Unknown (no lock file, no `/proc/locks`) counts as running.
pub fn is_running(state_dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(state_dir.join(LOCK_FILE)) else {
        return true;
    };
    let Ok(locks) = std::fs::read_to_string("/proc/locks") else {
        return true;
    };
    let dev = meta.dev();
    let id = format!(
        "{:02x}:{:02x}:{}",
        libc::major(dev),
        libc::minor(dev),
        meta.ino()
    );
    locks.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.get(1) == Some(&"FLOCK") && f.get(3) == Some(&"WRITE") && f.get(5) == Some(&id.as_str())
    })
}

/// The write-ahead log beside database `db`.
fn wal_of(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

pub(crate) fn classify(path: &Path, e: rusqlite::Error) -> StoreError {
    use rusqlite::ffi::ErrorCode;
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => StoreError::Corrupt {
            path: path.to_owned(),
            detail: e.to_string(),
        },
        _ => StoreError::Sqlite {
            path: path.to_owned(),
            source: e,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
