//! Opening the state directory's database: as the writer ([`Store::open`]:
//! the lock, the identity checks and adoption, the checkpointer), as a
//! companion connection of the writer's, or read-only.

use super::checkpoint::{Checkpointer, WRITER_AUTOCHECKPOINT};
use super::identity::{StateId, StateKind};
use super::lock::{is_running, lock_state_dir};
use super::schema::SECURE_DELETE;
use super::{DB_FILE, Store, StoreError, classify, connect, create, identity, put_meta};
use crate::events::Event as _;
use rusqlite::OpenFlags;
use rusqlite::config::DbConfig;
use std::path::{Path, PathBuf};
use std::sync::Arc;

impl Store {
    /// Open (creating if absent) the database in `state_dir`, check it and
    /// migrate it. An existing file that is not a healthy scangate database is
    /// refused, never recreated. Before a migration a copy of the database
    /// is kept beside it if the default `[outbox] min_free_mb` stays free
    /// ([`Store::open_with_floor`]).
    pub fn open(state_dir: &Path) -> Result<Store, StoreError> {
        Store::open_with_floor(
            state_dir,
            crate::config::OutboxConfig::default().min_free_mb,
        )
    }

    /// [`Store::open`], keeping a copy before a migration only if
    /// `min_free_mb` (`[outbox] min_free_mb`) stays free after it.
    pub fn open_with_floor(state_dir: &Path, min_free_mb: u64) -> Result<Store, StoreError> {
        crate::files::create_dir_all(state_dir).map_err(|source| StoreError::StateDir {
            dir: state_dir.to_owned(),
            source,
        })?;
        // Probe writability up front so the message names the directory, not
        // a later "unable to open database file".
        tempfile::tempfile_in(state_dir).map_err(|source| StoreError::StateDir {
            dir: state_dir.to_owned(),
            source,
        })?;
        let lock = lock_state_dir(state_dir)?;
        let path = state_dir.join(DB_FILE);
        identity::settle_journal(&path)?;
        let mut id_file = identity::read(state_dir)?;
        let found = identity::inspect(&path)?;
        if let StateKind::NeverStarted(leftovers) =
            identity::check(state_dir, id_file.as_ref(), &found)?
        {
            id_file = Some(first_start(state_dir, &leftovers)?);
        }
        let mut store = Store::open_file_migrating(&path, min_free_mb * 1024 * 1024)?;
        super::upgrade::tidy_copies(state_dir)?;
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
        id_file: Option<StateId>,
    ) -> Result<(), StoreError> {
        let in_db = self.meta(identity::META_KEY)?;
        let head = self
            .meta(identity::AUDIT_HEAD_KEY)?
            .as_deref()
            .and_then(identity::Head::parse);
        let mut id = id_file.clone().unwrap_or_default();
        match &in_db {
            // A database made by `state reset`, started before the file
            // was rewritten for it: its own identity, its own chain.
            Some(db_id) if id_file.as_ref().is_some_and(|f| f.id != *db_id) => {
                id = StateId {
                    id: db_id.clone(),
                    ..StateId::new()
                }
            }
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
        let path = started_db(state_dir)?;
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

    /// Open the existing database read-write without taking the state
    /// directory's lock, for the small writes that go on beside the
    /// running daemon (a ledger consumer's cursor,
    /// [`crate::ledger::cursor`]); never creates, migrates or adopts
    /// anything. Refused like [`Store::open_read_only`] when the database
    /// was lost or never made. Its writes are short transactions at
    /// `synchronous = NORMAL` (see `open_file_unlocked`).
    pub fn open_unlocked(state_dir: &Path) -> Result<Store, StoreError> {
        let path = started_db(state_dir)?;
        Store::open_file_unlocked(&path)
    }

    /// [`Store::open_file`] read-only through an `immutable=1` URI: SQLite
    /// neither locks nor looks for a write-ahead log.
    fn open_immutable(path: &Path) -> Result<Store, StoreError> {
        let uri = immutable_uri(&super::checked_path(path)?);
        Store::open_file_as(path, Some(&uri), true, None)
    }
}

/// The SQLite URI that opens the file at `path` (absolute) read-only as
/// one that never changes (`immutable=1`: no lock, no write-ahead log
/// looked for), each byte of the path outside `[A-Za-z0-9/._~-]`
/// percent-encoded.
pub(crate) fn immutable_uri(path: &Path) -> String {
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
    uri
}

/// A first start: remove what an unfinished one left, then build the
/// database with a new identity under a temporary name, put it in place,
/// and only then write the identity file (see `create`).
fn first_start(state_dir: &Path, leftovers: &[PathBuf]) -> Result<StateId, StoreError> {
    create::clear(state_dir, leftovers)?;
    let id = StateId::new();
    let mut store = create::begin(state_dir)?;
    let w = store.write()?;
    put_meta(&w, identity::META_KEY, &id.id).map_err(|e| w.err(e))?;
    w.commit()?;
    let db = create::install(store, state_dir)?;
    identity::write(state_dir, &id)?;
    crate::events::StateCreated {
        db: &db,
        state_id: &id.id,
    }
    .emit();
    Ok(id)
}

/// The database of `state_dir` for a command that neither makes nor
/// adopts one: refused when it was lost or replaced
/// ([`StoreError::Lost`], [`StoreError::Replaced`]) or never made
/// ([`StoreError::NotStarted`]).
fn started_db(state_dir: &Path) -> Result<PathBuf, StoreError> {
    let path = state_dir.join(DB_FILE);
    let id_file = identity::read(state_dir)?;
    let found = identity::inspect(&path)?;
    let judged = identity::check(state_dir, id_file.as_ref(), &found)?;
    if matches!(judged, StateKind::NeverStarted(_)) {
        return Err(StoreError::NotStarted {
            dir: state_dir.to_owned(),
        });
    }
    Ok(path)
}

/// The write-ahead log beside database `db`.
fn wal_of(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}
