//! The gateway's SQLite database: outbox, ledger, audit trail and metadata in
//! one file, so a decision, its ledger entry and its audit record commit in one
//! transaction (invariant 6) and one fsync.
//!
//! rusqlite is blocking: the daemon owns each [`Store`] on a thread of its
//! own (the outbox writer, each claimer lane, the sweeper) and never
//! touches one from the async runtime.
//!
//! This file holds the [`Store`], its errors and its transactions ([`Read`],
//! [`Write`], the `meta` values). Opening the state directory's database
//! (the writer, its companions, read-only) is in `open.rs`; the schema's
//! migrations in `migrations.rs`, applying them and opening one file as a
//! scangate database in `schema.rs`;
//! the state directory's lock in `lock.rs`.
//!
//! **Where a method of `Store` lives: with the table it works on.** Beside
//! the ones here, `open.rs` and `schema.rs` (opening), [`space`] (the file
//! system: free space, growth, the floor); the `scans` table's —
//! `admit`, `admit_and`, `has_pending`, `backlog`, `undecided`,
//! `outbox_status`, `unresolved`, `reopen_unresolved` — in
//! [`crate::outbox`], and `clear_raw`, `prune_decided` in
//! [`crate::outbox::raw`]. The ledger and the audit trail take a
//! transaction (`&Connection`) instead: their statements are functions of
//! [`crate::ledger`] and [`crate::audit`], run inside the deciding
//! transaction.

use checkpoint::Checkpointer;
use nix::fcntl::Flock;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use turn::{Turn, TurnGuard};

mod checkpoint;
mod create;
pub(crate) mod handoff;
pub(crate) mod identity;
mod lock;
mod migrations;
pub(crate) mod modes;
mod open;
pub mod packed;
mod schema;
pub(crate) mod space;
mod turn;
pub mod upgrade;

pub use lock::{LOCK_FILE, is_running};
pub(crate) use open::immutable_uri;

/// File name of the database inside the state directory.
pub const DB_FILE: &str = "scangate.db";

/// Why the database could not be used. Each says which file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The state directory cannot be created or written.
    #[error("state directory {dir}: {source}. Fix: {}", dir_advice(source))]
    StateDir {
        /// The directory.
        dir: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A read-only command in a state directory that holds no database:
    /// scangate never started there (or its first start was cut short,
    /// which the next start cleans up).
    #[error(
        "state directory {dir} holds no database: scangate has not started there yet. Fix: start it (systemctl start scangate), or name the gateway's config with --config"
    )]
    NotStarted {
        /// The directory.
        dir: PathBuf,
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
        "database {path} has schema version {found}, newer than this scangate understands ({known}): a later release migrated it, and it is left untouched. Fix: run that later release again; to go back to this one, restore the copy the later release kept before migrating (scangate.db.schema-{known}.before-<release> beside it, if it kept one: docs/technician.md, \"Rolling back\"), or a backup"
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
    /// The identity file cannot be read, or is not what scangate wrote.
    #[error("state identity file {path}: {detail}. Fix: {fix}")]
    IdFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
        /// What to do, for this fault.
        fix: String,
    },
    /// The identity file could not be rewritten. It is replaced atomically
    /// (a new file renamed over it), so the one on disk is still whole.
    #[error(
        "state identity file {path}: cannot rewrite it: {source}; the file on disk is intact (it is replaced whole, never written in place). Fix: {}",
        id_write_advice(path, source, *free_bytes, *min_free_mb)
    )]
    IdFileWrite {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
        /// Free bytes in its file system when it failed, if known.
        free_bytes: Option<u64>,
        /// The floor `[outbox] min_free_mb` (the anchor knows it; a first
        /// start does not).
        min_free_mb: Option<u64>,
    },
    /// A write handed to the outbox writer ([`handoff`]) was neither
    /// committed nor refused: the writer stopped (it panicked) first.
    #[error(
        "the outbox writer stopped before it wrote a claimer round; its scans stay open in the outbox and are claimed again (by scan UUID), the lane writing them itself. Fix: none needed for the scans; the log before this says why the writer stopped"
    )]
    WriterGone,
    /// A name in the state directory holds what scangate did not make (a
    /// link, a FIFO, a device, a second name of another file): refused,
    /// never followed or written through.
    #[error("state directory: {0}")]
    Planted(crate::files::FileError),
    /// Any other SQLite failure.
    #[error("database {path}: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The SQLite error.
        source: rusqlite::Error,
    },
}

/// What to do about an OS error on the state directory, by its kind.
fn dir_advice(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => {
            "the file system holding it is full: free space there (old logs: `journalctl --vacuum-size=100M`), or move [gateway] state_dir to a larger disk"
        }
        std::io::ErrorKind::NotFound => {
            "create it, or mount the disk it is on, or set [gateway] state_dir"
        }
        std::io::ErrorKind::ReadOnlyFilesystem => {
            "its file system is mounted read-only (after errors, `dmesg` says why): check the disk and remount it read-write"
        }
        _ => "create it writable for the service user, or set [gateway] state_dir",
    }
}

/// What to do when the identity file could not be rewritten.
fn id_write_advice(
    path: &Path,
    e: &std::io::Error,
    free_bytes: Option<u64>,
    min_free_mb: Option<u64>,
) -> String {
    let dir = path.parent().unwrap_or(path).display();
    // (The running daemon's anchor, which knows the floor, tries again at
    // its next tick; a start or a reset is run again.)
    let retry = if min_free_mb.is_some() {
        "; scangate retries by itself"
    } else {
        ", then run the command again"
    };
    match e.kind() {
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => format!(
            "the file system holding {dir} is full ({} free{}): free space there (old logs: `journalctl --vacuum-size=100M`), or move [gateway] state_dir to a larger disk{retry}",
            free_bytes.map_or_else(|| "free space unknown".into(), space::mib),
            min_free_mb.map_or_else(String::new, |mb| format!(
                "; scans are refused below [outbox] min_free_mb = {mb}"
            ))
        ),
        _ => format!("{}{retry}", dir_advice(e)),
    }
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

impl Store {
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

/// The statement in `slot`, prepared for `sql` on `tx` the first time
/// (rusqlite's statement cache is looked up then, not at every run): how a
/// transaction's per-scan writers hold theirs (the audit chain, the outbox
/// rows, the ledger).
pub fn held<'s, 't>(
    slot: &'s mut Option<rusqlite::CachedStatement<'t>>,
    tx: &'t Connection,
    sql: &str,
) -> rusqlite::Result<&'s mut rusqlite::CachedStatement<'t>> {
    Ok(match slot {
        Some(statement) => statement,
        slot => slot.insert(tx.prepare_cached(sql)?),
    })
}

/// A connection to the existing database `db` (`flags`: read-only or
/// read-write) that waits up to 5 s for a lock.
pub(crate) fn connect(db: &Path, flags: OpenFlags) -> Result<Connection, StoreError> {
    let checked = checked_path(db)?;
    let conn = Connection::open_with_flags(
        checked,
        flags | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_NOFOLLOW,
    )
    .map_err(|e| classify(db, e))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(|e| classify(db, e))?;
    Ok(conn)
}

/// The details of `EXPLAIN QUERY PLAN sql`, joined (tests that hold a
/// query to its index).
#[cfg(test)]
pub(crate) fn query_plan(conn: &Connection, sql: &str) -> String {
    let mut q = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    let details: Vec<String> = q
        .query_map([], |r| r.get::<_, String>(3))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    details.join("; ")
}

/// The suffixes of the files SQLite keeps beside a database.
pub(crate) const BESIDE: [&str; 4] = ["", "-journal", "-wal", "-shm"];

/// Refuse the database `db` if it, or a file SQLite keeps beside it, is
/// not a regular file of scangate's own ([`crate::files::unfit`]): SQLite
/// would follow a link at the database's name and write into what it
/// names.
pub(crate) fn refuse_planted(db: &Path) -> Result<(), StoreError> {
    for suffix in BESIDE {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        crate::files::refuse_unfit(Path::new(&name)).map_err(|e| file_error(db, e))?;
    }
    Ok(())
}

/// Where SQLite is to open `db`, told not to follow a link
/// (`SQLITE_OPEN_NOFOLLOW`, refused since SQLite's own files beside it
/// are opened with `O_NOFOLLOW` anyway): after [`refuse_planted`], with
/// the links in its directory's path resolved (a state directory may
/// itself be a link, to another disk; only the names inside it are
/// scangate's own).
pub(crate) fn checked_path(db: &Path) -> Result<PathBuf, StoreError> {
    refuse_planted(db)?;
    let resolved = match (db.parent(), db.file_name()) {
        (Some(dir), Some(name)) if !dir.as_os_str().is_empty() => std::fs::canonicalize(dir)
            .map(|d| d.join(name))
            .unwrap_or_else(|_| db.to_owned()),
        _ => db.to_owned(),
    };
    Ok(resolved)
}

/// A [`crate::files::FileError`] on `file`, a file in the state directory.
pub(crate) fn file_error(file: &Path, e: crate::files::FileError) -> StoreError {
    match e {
        crate::files::FileError::Io { source, .. } => StoreError::StateDir {
            dir: file.parent().unwrap_or(file).to_owned(),
            source,
        },
        planted => StoreError::Planted(planted),
    }
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
