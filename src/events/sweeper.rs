//! The raw-bytes sweeper: what it swept, and what failed.

use super::Event;
use std::time::Duration;

// The log targets operators filter on (`RUST_LOG`, the journal): keep the values.
const SWEEPER_TARGET: &str = "scangate::daemon::sweeper";

/// A step of the raw-bytes sweeper's that failed; retried later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SweepStep {
    /// The page check after start could not run (retried every `every`).
    PageCheck {
        /// Until the next attempt.
        every: Duration,
    },
    /// Shrinking its page cache.
    ShrinkCache,
    /// Overwriting old raw bytes (retried at the next sweep, `every` on).
    ClearRaw {
        /// Until the next sweep.
        every: Duration,
    },
    /// Truncating the WAL after clearing.
    TruncateWal,
    /// Reading the ledger before removing decided outbox rows (retried at
    /// the next sweep, `every` on).
    ReadLedger {
        /// Until the next sweep.
        every: Duration,
    },
    /// Removing decided outbox rows (retried at the next sweep, `every`
    /// on; told without the `db` field).
    Prune {
        /// Until the next sweep.
        every: Duration,
    },
    /// Removing received serials past `[checks] serial_retention_days`
    /// (retried at the next sweep, `every` on).
    PruneSerials {
        /// Until the next sweep.
        every: Duration,
    },
}

/// The raw-bytes sweeper could not do a step.
pub struct SweepFailed<'a> {
    /// The database.
    pub db: &'a std::path::Path,
    /// Which step.
    pub step: SweepStep,
    /// What SQLite said.
    pub error: &'a dyn std::fmt::Display,
}

impl Event for SweepFailed<'_> {
    /// Log it: ERROR when the page check cannot run, else WARN.
    fn emit(self) {
        let (db, e) = (self.db.display(), self.error);
        match self.step {
            SweepStep::PageCheck { every } => tracing::error!(
                target: SWEEPER_TARGET,
                db = %db,
                "database integrity check could not run: {e}; raw scan bytes are not swept until it can, next attempt in {every:?}"
            ),
            SweepStep::ShrinkCache => tracing::warn!(
                target: SWEEPER_TARGET,
                db = %db,
                "raw-bytes sweeper: cannot shrink its page cache: {e}"
            ),
            SweepStep::ClearRaw { every } => tracing::warn!(
                target: SWEEPER_TARGET,
                db = %db,
                "clearing old raw scan bytes failed: {e}; they stay until the next sweep in {every:?}"
            ),
            SweepStep::TruncateWal => tracing::warn!(
                target: SWEEPER_TARGET,
                db = %db,
                "truncating the WAL after clearing raw scan bytes failed: {e}"
            ),
            SweepStep::ReadLedger { every } => tracing::warn!(
                target: SWEEPER_TARGET,
                db = %db,
                "removing decided outbox rows: cannot read the ledger: {e}; they stay until the next sweep in {every:?}"
            ),
            SweepStep::Prune { every } => tracing::warn!(
                target: SWEEPER_TARGET,
                "removing decided outbox rows failed: {e}; they stay until the next sweep in {every:?}"
            ),
            SweepStep::PruneSerials { every } => tracing::warn!(
                target: SWEEPER_TARGET,
                db = %db,
                "removing received serial numbers past their retention failed: {e}; they stay until the next sweep in {every:?}"
            ),
        }
    }
}

/// What the raw-bytes sweeper did (INFO; a row holding the raw bytes back
/// WARN).
pub enum Swept<'a> {
    /// The page check after start passed.
    IntegrityPassed {
        /// The database.
        db: &'a std::path::Path,
    },
    /// Raw bytes of decided scans were overwritten.
    RawCleared {
        /// How many scans.
        cleared: u64,
        /// `[outbox] keep_raw_hours`.
        keep_raw_hours: u64,
        /// Whether the WAL was truncated after.
        wal_truncated: bool,
    },
    /// An undecided row keeps the raw bytes of it and every later scan.
    HeldBy {
        /// The row.
        seq: i64,
        /// Its state.
        state: &'a dyn std::fmt::Display,
        /// How long it has waited (hours).
        age_h: i64,
    },
    /// A WAL truncation owed since a sweep (readers were in the way) was
    /// done: the cleared bytes are gone from the WAL too.
    WalTruncated,
    /// Decided outbox rows older than the dedup horizon were removed.
    Pruned {
        /// How many.
        removed: u64,
        /// The horizon (hours).
        horizon_h: u64,
    },
    /// Received serials older than `[checks] serial_retention_days` were
    /// removed.
    SerialsPruned {
        /// How many.
        removed: u64,
        /// The retention (days).
        retention_days: u64,
    },
}

impl Event for Swept<'_> {
    /// Log it: INFO, a row holding the raw bytes back WARN.
    fn emit(self) {
        match self {
            Swept::IntegrityPassed { db } => tracing::info!(
                target: SWEEPER_TARGET,
                db = %db.display(),
                "database integrity check passed"
            ),
            Swept::RawCleared {
                cleared,
                keep_raw_hours,
                wal_truncated,
            } => tracing::info!(
                target: SWEEPER_TARGET,
                cleared,
                keep_raw_hours,
                wal_truncated,
                "overwrote the raw bytes of {cleared} scans decided more than {keep_raw_hours} h ago"
            ),
            Swept::WalTruncated => tracing::info!(
                target: SWEEPER_TARGET,
                wal_truncated = true,
                "the WAL was truncated: the raw bytes cleared by the last sweep are gone from it too"
            ),
            Swept::HeldBy { seq, state, age_h } => tracing::warn!(
                target: SWEEPER_TARGET,
                seq,
                state = %state,
                "outbox row {seq} has waited {age_h} h for a decision ({state}); the raw bytes of it and of every later scan are kept until it is decided (see `scangate outbox status`)"
            ),
            Swept::Pruned { removed, horizon_h } => tracing::info!(
                target: SWEEPER_TARGET,
                removed,
                "removed {removed} decided outbox rows older than the dedup horizon ({horizon_h} h); their audit records and ledger entries stay"
            ),
            Swept::SerialsPruned {
                removed,
                retention_days,
            } => tracing::info!(
                target: SWEEPER_TARGET,
                removed,
                "forgot {removed} received serial numbers first received more than {retention_days} days ago (a second receipt of one is no longer told suspect)"
            ),
        }
    }
}
