//! A schema migration as an operator lives it: announced (from which
//! schema to which, how many rows), reported every few seconds with
//! systemd's start timeout extended each time (`EXTEND_TIMEOUT_USEC`: a
//! long migration on an SD card is never killed as a hung start), and
//! done; before it, a copy of the database as it was, beside it, for a
//! rollback to the earlier release.
//!
//! Each migration commits in a transaction of its own (`schema.rs`), so a
//! kill or a power cut at any point leaves the database at a version in
//! between, which the next start migrates on from. A copy cut short is a
//! `.tmp` file that the next start removes and makes again; a copy once
//! made is not made again by a later start of the same release.

use super::{DB_FILE, StoreError, classify, create::sync_dir};
use crate::events::{
    Event as _, MigrationCopy, MigrationDone, MigrationProgress, MigrationStarting,
};
use crate::notify::Notifier;
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// Days a copy kept before a migration stays: the first start after that
/// removes it.
pub const KEEP_COPY_DAYS: u64 = 7;

/// A progress line (and a longer start timeout) this often.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);
/// Each report gives the start this much longer from now: several reports.
const EXTEND_BY: Duration = Duration::from_secs(60);
/// Room a copy is kept only with: this many times the database's size
/// (the copy, and the migration's growth after it) above `[outbox]
/// min_free_mb`.
const MIGRATION_ROOM: u64 = 3;
/// SQLite VM instructions between two looks at the clock.
const OPS_BETWEEN_LOOKS: i32 = 100_000;

/// The copy of the database `db`, at schema `from`, that this release
/// keeps before migrating it: `scangate.db.schema-<from>.before-<version>`.
pub fn copy_path(db: &Path, from: i64) -> PathBuf {
    db.with_file_name(format!(
        "{DB_FILE}.schema-{from}.before-{}",
        crate::build::VERSION
    ))
}

/// A migration under way on one connection.
pub(super) struct Migration {
    from: i64,
    to: i64,
    started: Instant,
    /// The migration being applied (the schema version it makes).
    step: Arc<AtomicI64>,
}

impl Migration {
    /// Announce migrating `db` (on `conn`) from schema `from` to `to` when
    /// `floor` is given (`None`, or `from` 0: a database being created,
    /// nothing to say), and report its progress from now on (the check of
    /// its pages and the copy included: [`Migration::keep_copy`]).
    pub(super) fn begin(
        conn: &mut Connection,
        db: &Path,
        from: i64,
        to: i64,
        floor: Option<u64>,
    ) -> Result<Migration, StoreError> {
        let started = Instant::now();
        let step = Arc::new(AtomicI64::new(from));
        if floor.is_none() || from == 0 {
            return Ok(Migration {
                from,
                to,
                started,
                step,
            });
        }
        // The rows as their positions count them (instant, where count(*)
        // would read every table before the first line is logged; rows
        // pruned since are counted too).
        let rows: i64 = conn
            .query_row(
                "SELECT coalesce((SELECT max(seq) FROM scans), 0)
                      + coalesce((SELECT max(seq) FROM ledger), 0)
                      + coalesce((SELECT max(seq) FROM audit), 0)",
                [],
                |r| r.get(0),
            )
            .map_err(|e| classify(db, e))?;
        MigrationStarting { db, from, to, rows }.emit();
        let notifier = Notifier::from_env();
        let status = format!("migrating the database from schema {from} to {to}");
        notifier.extend_timeout(EXTEND_BY, &status);
        let mut last = Instant::now();
        let at = Arc::clone(&step);
        conn.progress_handler(
            OPS_BETWEEN_LOOKS,
            Some(move || {
                if last.elapsed() >= PROGRESS_EVERY {
                    last = Instant::now();
                    MigrationProgress {
                        step: at.load(Ordering::Relaxed),
                        to,
                        elapsed: started.elapsed(),
                    }
                    .emit();
                    notifier.extend_timeout(EXTEND_BY, &status);
                }
                false
            }),
        )
        .map_err(|e| classify(db, e))?;
        Ok(Migration {
            from,
            to,
            started,
            step,
        })
    }

    /// Keep a copy of `db` as it is, before the first migration, if
    /// `floor` (`[outbox] min_free_mb` in bytes) leaves room for it and
    /// for the migration (see `keep_copy`); `None`: nothing to keep.
    pub(super) fn keep_copy(
        &self,
        conn: &Connection,
        db: &Path,
        floor: Option<u64>,
    ) -> Result<(), StoreError> {
        match floor {
            Some(floor) if self.from > 0 => keep_copy(conn, db, self.from, floor),
            _ => Ok(()),
        }
    }

    /// Migration `n` (making schema version `n`) is being applied.
    pub(super) fn step(&self, n: i64) {
        self.step.store(n, Ordering::Relaxed);
    }

    /// Every migration is committed: stop reporting, and say so.
    pub(super) fn done(self, conn: &mut Connection, db: &Path) -> Result<(), StoreError> {
        conn.progress_handler(0, None::<fn() -> bool>)
            .map_err(|e| classify(db, e))?;
        if self.from > 0 {
            MigrationDone {
                from: self.from,
                to: self.to,
                elapsed: self.started.elapsed(),
            }
            .emit();
        }
        Ok(())
    }
}

/// Keep `db` (at schema `from`) as it is in [`copy_path`], through a
/// `.tmp` file renamed once written and synced, unless this release kept
/// one already (a start cut short during the migration) or the copy and
/// the migration after it would not leave `floor` bytes free. A copy that
/// fails is warned of and the migration goes ahead.
fn keep_copy(conn: &Connection, db: &Path, from: i64, floor: u64) -> Result<(), StoreError> {
    let copy = copy_path(db, from);
    let dir = db.parent().unwrap_or(Path::new("."));
    let ours = format!(".before-{}", crate::build::VERSION);
    if copies(dir)?
        .iter()
        .any(|c| c.to_string_lossy().ends_with(&ours))
    {
        return Ok(());
    }
    let tmp = tmp_of(&copy);
    remove_tmp(&tmp);
    // (SQLite writes the copy through a link at its name unless the
    // connection refuses links: it does, see `checked_path`.)
    let tmp = super::checked_path(&tmp)?;
    let size = [db.to_path_buf(), wal_of(db)]
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum::<u64>();
    // The copy is the database's size at most; the migrations after it
    // rebuild tables in a transaction each, so the write-ahead log and the
    // file grow by up to about twice the database (measured from a
    // schema-1 state: docs/benchmarks.md). A copy never takes the room
    // the migration needs.
    let needed = size.saturating_mul(MIGRATION_ROOM);
    let free = super::space::free_bytes(dir).unwrap_or(0);
    if free < needed.saturating_add(floor) {
        MigrationCopy::NoRoom {
            path: &copy,
            free,
            needed,
        }
        .emit();
        return Ok(());
    }
    let made = conn
        .execute("VACUUM INTO ?1", [tmp.to_string_lossy()])
        .map_err(|e| classify(db, e))
        .and_then(|_| {
            std::fs::File::open(&tmp)
                .and_then(|f| f.sync_all())
                .and_then(|()| std::fs::rename(&tmp, &copy))
                .map_err(|source| StoreError::StateDir {
                    dir: dir.to_owned(),
                    source,
                })
        })
        .and_then(|()| sync_dir(dir));
    match made {
        Ok(()) => {
            let bytes = std::fs::metadata(&copy).map_or(0, |m| m.len());
            MigrationCopy::Kept { path: &copy, bytes }.emit();
        }
        Err(e) => {
            remove_tmp(&tmp);
            MigrationCopy::Failed { error: &e }.emit();
        }
    }
    Ok(())
}

/// Remove, from the state directory `dir`, copies cut short (and their
/// journals) and copies kept longer than [`KEEP_COPY_DAYS`] (at the writer's start, after the
/// migrations).
pub(super) fn tidy_copies(dir: &Path) -> Result<(), StoreError> {
    let keep = Duration::from_secs(KEEP_COPY_DAYS * 24 * 3600);
    let now = SystemTime::now();
    for copy in copies(dir)? {
        let name = copy.to_string_lossy();
        let old = std::fs::symlink_metadata(&copy)
            .and_then(|m| m.modified())
            .is_ok_and(|t| now.duration_since(t).is_ok_and(|age| age > keep));
        if name.ends_with(".tmp") || name.contains(".tmp-") {
            let _ = std::fs::remove_file(&copy);
        } else if old && std::fs::remove_file(&copy).is_ok() {
            MigrationCopy::Removed { path: &copy }.emit();
        }
    }
    Ok(())
}

/// The copies (and cut-short copies) in `dir`: regular files named
/// `scangate.db.schema-…`.
pub fn copies(dir: &Path) -> Result<Vec<PathBuf>, StoreError> {
    let prefix = format!("{DB_FILE}.schema-");
    let entries = std::fs::read_dir(dir).map_err(|source| StoreError::StateDir {
        dir: dir.to_owned(),
        source,
    })?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .collect();
    found.sort();
    Ok(found)
}

/// Remove a copy cut short: `tmp`, and the journal SQLite kept beside it
/// while writing it.
fn remove_tmp(tmp: &Path) {
    for suffix in ["", "-journal", "-wal"] {
        let mut name = tmp.as_os_str().to_owned();
        name.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(name));
    }
}

fn tmp_of(copy: &Path) -> PathBuf {
    let mut name = copy.as_os_str().to_owned();
    name.push(".tmp");
    PathBuf::from(name)
}

fn wal_of(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_never_writes_a_copy_through_a_link() {
        // A link planted at a copy's name after scangate looked: SQLite,
        // told not to follow links, refuses it (the migration's copy).
        let dir = tempfile::tempdir().unwrap();
        let dir = std::fs::canonicalize(dir.path()).unwrap();
        let store = crate::store::Store::open_file(&dir.join(DB_FILE), false).unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, "").unwrap();
        let link = dir.join("copy");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let e = store
            .conn
            .execute("VACUUM INTO ?1", [link.to_string_lossy()])
            .unwrap_err();
        assert!(e.to_string().contains("unable to open"), "{e}");
        assert_eq!(std::fs::metadata(&victim).unwrap().len(), 0);
        // The control: through a plain name it writes.
        store
            .conn
            .execute("VACUUM INTO ?1", [dir.join("plain").to_string_lossy()])
            .unwrap();
        assert!(std::fs::metadata(dir.join("plain")).unwrap().len() > 0);
    }
}
