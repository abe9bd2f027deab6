//! The database and the audit trail: the state identity, the chain head anchored, checkpoints, an unreadable record.

use super::Event;

// The log targets operators filter on (`RUST_LOG`, the journal): keep the values.
const ANCHOR_TARGET: &str = "scangate::anchor";
// `crate::audit::AUDIT_TARGET` (a floor above): the audit journal identifier.
const AUDIT_TARGET: &str = "scangate::audit";
const DAEMON_TARGET: &str = "scangate::daemon";
const STORE_TARGET: &str = "scangate::store";
const CHECKPOINT_TARGET: &str = "scangate::store::checkpoint";

/// Where an audit chain head was to be anchored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnchorPlace {
    /// The `state-id` file, while running.
    StateFile,
    /// The `state-id` file, at stop.
    StateFileAtStop,
    /// The facility store.
    Facility,
}

/// The audit chain head was anchored outside the database.
pub struct AnchorWritten<'a> {
    /// The state's identity.
    pub state_id: &'a str,
    /// The head's position.
    pub seq: i64,
    /// The head's hash.
    pub hash: &'a str,
}

impl Event for AnchorWritten<'_> {
    /// Log it (INFO, target `scangate::anchor`).
    fn emit(self) {
        tracing::info!(
            target: ANCHOR_TARGET,
            state_id = %self.state_id, audit_head_seq = self.seq, audit_head_hash = %self.hash,
            "audit chain head anchored"
        );
    }
}

/// Anchoring the audit chain head failed (retried at the next tick).
pub struct AnchorFailed<'a> {
    /// Where.
    pub place: AnchorPlace,
    /// Why.
    pub error: &'a dyn std::fmt::Display,
}

impl Event for AnchorFailed<'_> {
    /// Log it (WARN).
    fn emit(self) {
        let e = self.error;
        match self.place {
            AnchorPlace::StateFile => tracing::warn!(
                target: DAEMON_TARGET,
                "cannot anchor the audit chain head: {e}"
            ),
            AnchorPlace::StateFileAtStop => tracing::warn!(
                target: DAEMON_TARGET,
                "cannot anchor the audit chain head at stop: {e}"
            ),
            AnchorPlace::Facility => tracing::warn!(
                target: DAEMON_TARGET,
                "cannot anchor the audit chain head in the facility store: {e}"
            ),
        }
    }
}

/// A passive WAL checkpoint failed (told once; the writer checkpoints by
/// itself).
pub struct CheckpointFailed<'a> {
    /// The database.
    pub db: &'a std::path::Path,
    /// What SQLite said.
    pub error: &'a dyn std::fmt::Display,
}

impl Event for CheckpointFailed<'_> {
    /// Log it (WARN).
    fn emit(self) {
        tracing::warn!(
            target: CHECKPOINT_TARGET,
            db = %self.db.display(),
            "WAL checkpoint failed: {}; the writer checkpoints by itself", self.error
        );
    }
}

/// A first start built this state directory's database and its identity
/// (INFO, target `scangate::store`).
pub struct StateCreated<'a> {
    /// The database.
    pub db: &'a std::path::Path,
    /// The new state's identity.
    pub state_id: &'a str,
}

impl Event for StateCreated<'_> {
    /// Log it (INFO).
    fn emit(self) {
        tracing::info!(
            target: STORE_TARGET,
            db = %self.db.display(), state_id = %self.state_id,
            "first start: a new database with a new state identity"
        );
    }
}

/// A first start removed what an earlier one, cut short, left in the
/// state directory: nothing was stored in it (WARN, target `scangate::store`).
pub struct FirstStartLeftoversRemoved<'a> {
    /// The state directory.
    pub dir: &'a std::path::Path,
    /// The files removed, with their sizes in bytes.
    pub files: &'a [(std::path::PathBuf, u64)],
}

impl Event for FirstStartLeftoversRemoved<'_> {
    /// Log it (WARN).
    fn emit(self) {
        let files = self
            .files
            .iter()
            .map(|(p, len)| format!("{} ({len} B)", p.display()))
            .collect::<Vec<_>>()
            .join(", ");
        tracing::warn!(
            target: STORE_TARGET,
            dir = %self.dir.display(), files = %files,
            "an earlier first start was cut short (no state identity was written, so nothing was stored): removed what it left, starting afresh"
        );
    }
}

/// A database older than state identities takes its state directory's
/// (WARN, target `scangate::store`).
pub struct StateIdentityAdopted<'a> {
    /// The database.
    pub db: &'a std::path::Path,
    /// The identity it takes.
    pub state_id: &'a str,
}

impl Event for StateIdentityAdopted<'_> {
    /// Log it (WARN).
    fn emit(self) {
        tracing::warn!(
            target: STORE_TARGET,
            db = %self.db.display(), state_id = %self.state_id,
            "the database has no state identity (written before identities): it takes this state directory's"
        );
    }
}

/// An audit record could not be parsed and is left out of what was read
/// (WARN, target `scangate::audit`).
pub struct AuditRecordUnreadable<'a> {
    /// Its position.
    pub seq: i64,
    /// Why.
    pub error: &'a dyn std::fmt::Display,
}

impl Event for AuditRecordUnreadable<'_> {
    /// Log it (WARN).
    fn emit(self) {
        tracing::warn!(
            target: AUDIT_TARGET,
            "audit record {} is unreadable ({}) and left out; run `scangate audit verify`",
            self.seq, self.error
        );
    }
}

/// A schema migration begins (INFO): the database, its schema version and
/// the version this build writes, and how many rows it holds.
pub struct MigrationStarting<'a> {
    /// The database.
    pub db: &'a std::path::Path,
    /// Its schema version.
    pub from: i64,
    /// This build's.
    pub to: i64,
    /// Scans, ledger entries and audit records written to it (their
    /// positions: those pruned since count too).
    pub rows: i64,
}

impl Event for MigrationStarting<'_> {
    /// Log it (INFO).
    fn emit(self) {
        tracing::info!(
            target: STORE_TARGET,
            db = %self.db.display(), from = self.from, to = self.to, rows = self.rows,
            "migrating the database from schema {} to {} ({} rows): its pages are checked, a copy is kept, then it is migrated; scans wait until it is done, do not stop the service",
            self.from, self.to, self.rows
        );
    }
}

/// A schema migration is still running (INFO, every few seconds).
pub struct MigrationProgress {
    /// The migration running (its number is the schema version it makes).
    pub step: i64,
    /// The version this build writes.
    pub to: i64,
    /// Since the migration began.
    pub elapsed: std::time::Duration,
}

impl Event for MigrationProgress {
    /// Log it (INFO).
    fn emit(self) {
        tracing::info!(
            target: STORE_TARGET,
            step = self.step, to = self.to, elapsed_s = self.elapsed.as_secs(),
            "migrating: schema {} of {}, {} s so far",
            self.step, self.to, self.elapsed.as_secs()
        );
    }
}

/// A schema migration is done (INFO).
pub struct MigrationDone {
    /// The schema version migrated from.
    pub from: i64,
    /// The one migrated to.
    pub to: i64,
    /// How long it took, the copy kept before it included.
    pub elapsed: std::time::Duration,
}

impl Event for MigrationDone {
    /// Log it (INFO).
    fn emit(self) {
        tracing::info!(
            target: STORE_TARGET,
            from = self.from, to = self.to, elapsed_ms = self.elapsed.as_millis() as u64,
            "database migrated from schema {} to {} in {:.1} s",
            self.from, self.to, self.elapsed.as_secs_f64()
        );
    }
}

/// What became of the copy of the database kept before a migration.
pub enum MigrationCopy<'a> {
    /// Kept (INFO): a rollback restores it.
    Kept {
        /// The copy.
        path: &'a std::path::Path,
        /// Its size.
        bytes: u64,
    },
    /// Not kept (WARN): too little free space.
    NoRoom {
        /// The copy it would have been.
        path: &'a std::path::Path,
        /// Free bytes in the state directory's file system.
        free: u64,
        /// What the copy and the migration after it need on top of
        /// `[outbox] min_free_mb`.
        needed: u64,
    },
    /// Not kept (WARN): making it failed.
    Failed {
        /// Why.
        error: &'a dyn std::fmt::Display,
    },
    /// An old copy is removed (INFO): it is older than the days copies are kept.
    Removed {
        /// The copy.
        path: &'a std::path::Path,
    },
}

impl Event for MigrationCopy<'_> {
    /// Log it.
    fn emit(self) {
        match self {
            MigrationCopy::Kept { path, bytes } => tracing::info!(
                target: STORE_TARGET,
                copy = %path.display(), bytes,
                "the database as it was before the migration is kept in {} ({} MiB): docs/technician.md, \"Rolling back\", says how to go back to the earlier release with it",
                path.display(), bytes / (1024 * 1024)
            ),
            MigrationCopy::NoRoom { path, free, needed } => tracing::warn!(
                target: STORE_TARGET,
                copy = %path.display(), free_bytes = free, needed_bytes = needed,
                "no copy of the database is kept before the migration: {} MiB free, {} MiB needed for the copy and the migration above [outbox] min_free_mb; the migration goes ahead, but a rollback to the earlier release will need a backup of your own",
                free / (1024 * 1024), needed / (1024 * 1024)
            ),
            MigrationCopy::Failed { error } => tracing::warn!(
                target: STORE_TARGET,
                "no copy of the database is kept before the migration ({error}); the migration goes ahead, but a rollback to the earlier release will need a backup of your own"
            ),
            MigrationCopy::Removed { path } => tracing::info!(
                target: STORE_TARGET,
                copy = %path.display(),
                "removed {}: kept for the days after a migration in which a rollback may be wanted",
                path.display()
            ),
        }
    }
}

/// A part of the state directory that others may read or write (WARN, at
/// the daemon's start).
pub struct StateExposed<'a> {
    /// The file or directory.
    pub path: &'a std::path::Path,
    /// Its permission bits.
    pub mode: u32,
    /// The whole warning: who may, and the `chmod` that fixes it.
    pub warning: &'a dyn std::fmt::Display,
}

impl Event for StateExposed<'_> {
    /// Log it (WARN, target `scangate::store`).
    fn emit(self) {
        tracing::warn!(
            target: STORE_TARGET,
            path = %self.path.display(), mode = format_args!("{:04o}", self.mode & 0o7777),
            "{}", self.warning
        );
    }
}
