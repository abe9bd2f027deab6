//! A new database comes into its state directory whole, or not at all.
//!
//! It is built under a temporary name (`scangate.db.new`: schema, WAL mode,
//! its identity in `meta`), its log folded into the file, the file fsynced,
//! renamed into place and the directory fsynced; only then is `state-id`
//! written beside it. So a crash at any point leaves one of two things:
//! a state directory that was never started (at most the leftovers of an
//! unfinished start — a lock, a temporary file, or what an older scangate
//! left: an empty or header-only database, its journal or log — which
//! [`leftovers`] names and the next start removes), or a database with its
//! identity, which the next start opens (and writes `state-id` from, if
//! the crash came before it). A first start and a state reset both build
//! their database this way.

use super::{BESIDE, DB_FILE, Store, StoreError};
use crate::events::Event as _;
use std::path::{Path, PathBuf};

/// The name a new database is built under, beside its final name.
const BUILDING: &str = "scangate.db.new";

/// The files in `state_dir` that an unfinished first start can leave (the
/// database's, the one being built and what SQLite keeps beside each),
/// those that exist. Only to be removed once the identity check has found
/// that the state directory never held a database.
pub(crate) fn leftovers(state_dir: &Path) -> Vec<PathBuf> {
    [DB_FILE, BUILDING]
        .iter()
        .flat_map(|name| {
            BESIDE
                .iter()
                .map(move |s| state_dir.join(format!("{name}{s}")))
        })
        // (Regular files only: a link is never a leftover.)
        .filter(|p| p.symlink_metadata().is_ok_and(|m| m.file_type().is_file()))
        .collect()
}

/// Remove the leftovers of an unfinished first start (`files`, as
/// [`leftovers`] found them), saying so in the log.
pub(crate) fn clear(state_dir: &Path, files: &[PathBuf]) -> Result<(), StoreError> {
    if files.is_empty() {
        return Ok(());
    }
    let sizes: Vec<(PathBuf, u64)> = files
        .iter()
        .map(|p| (p.clone(), p.symlink_metadata().map_or(0, |m| m.len())))
        .collect();
    for p in files {
        match std::fs::remove_file(p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(dir_error(state_dir, source)),
        }
    }
    sync_dir(state_dir)?;
    crate::events::FirstStartLeftoversRemoved {
        dir: state_dir,
        files: &sizes,
    }
    .emit();
    Ok(())
}

/// Start building a new database in `state_dir` under the temporary name
/// (whatever an earlier attempt left there is removed first): created,
/// in WAL mode, migrated. The caller writes what must be in it from the
/// start (its identity) and hands it to [`install`].
pub(crate) fn begin(state_dir: &Path) -> Result<Store, StoreError> {
    super::refuse_planted(&state_dir.join(BUILDING))?;
    for s in BESIDE {
        let p = state_dir.join(format!("{BUILDING}{s}"));
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(dir_error(state_dir, source)),
        }
    }
    Store::open_file(&state_dir.join(BUILDING), false)
}

/// Put a database built by [`begin`] in place: its write-ahead log folded
/// into the file, the connection closed, the file fsynced, renamed to
/// `scangate.db`, the directory fsynced. Returns the database's path.
pub(crate) fn install(store: Store, state_dir: &Path) -> Result<PathBuf, StoreError> {
    let building = store.path().to_owned();
    store.checkpoint()?;
    // Closing the last connection removes its -wal and -shm.
    drop(store);
    let wal = state_dir.join(format!("{BUILDING}-wal"));
    match std::fs::metadata(&wal) {
        // Emptied by the checkpoint: nothing in it to lose.
        Ok(m) if m.len() == 0 => std::fs::remove_file(&wal).map_err(|e| dir_error(state_dir, e))?,
        Ok(_) => {
            return Err(dir_error(
                state_dir,
                std::io::Error::other(format!(
                    "the new database's write-ahead log {} was not folded into it",
                    wal.display()
                )),
            ));
        }
        Err(_) => {}
    }
    let _ = std::fs::remove_file(state_dir.join(format!("{BUILDING}-shm")));
    std::fs::File::open(&building)
        .and_then(|f| f.sync_all())
        .map_err(|source| dir_error(state_dir, source))?;
    let db = state_dir.join(DB_FILE);
    // Nothing may be beside the name it takes: SQLite would read an old
    // journal or log as the new database's.
    for s in &BESIDE[1..] {
        let p = state_dir.join(format!("{DB_FILE}{s}"));
        if p.symlink_metadata().is_ok() {
            return Err(dir_error(
                state_dir,
                std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    format!(
                        "{} is there, beside where the new database goes: move it away, then start again",
                        p.display()
                    ),
                ),
            ));
        }
    }
    std::fs::rename(&building, &db).map_err(|source| dir_error(state_dir, source))?;
    sync_dir(state_dir)?;
    Ok(db)
}

/// fsync the directory `dir`, so a rename or removal in it is durable.
pub(super) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| dir_error(dir, source))
}

fn dir_error(dir: &Path, source: std::io::Error) -> StoreError {
    StoreError::StateDir {
        dir: dir.to_owned(),
        source,
    }
}
