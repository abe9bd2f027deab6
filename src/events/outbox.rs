//! The outbox writer: scans not stored (no ACK goes out), deciding failed, writes again.

use super::Event;
use std::time::Duration;

// The log targets operators filter on (`RUST_LOG`, the journal): keep the values.
const DAEMON_TARGET: &str = "scangate::daemon";
const OUTBOX_TARGET: &str = "scangate::outbox";

/// Scans could not be written to the outbox; the write is retried and no
/// ACK goes out before it succeeds.
pub struct OutboxWriteFailed<'a> {
    /// The database.
    pub db: &'a std::path::Path,
    /// How many scans the batch holds.
    pub scans: usize,
    /// What the database said.
    pub error: &'a dyn std::fmt::Display,
    /// When it is tried again.
    pub retry_in: Duration,
}

impl Event for OutboxWriteFailed<'_> {
    /// Log it (ERROR).
    fn emit(self) {
        tracing::error!(
            target: DAEMON_TARGET,
            db = %self.db.display(), scans = self.scans,
            "cannot write scans to the outbox: {}; retrying in {:?} (no ACK is sent until this succeeds)",
            self.error, self.retry_in
        );
    }
}

/// A scan read while stopping could not be stored (the database refused
/// writes); it was not acknowledged.
pub struct ScanNotStored<'a> {
    /// The scanner's name.
    pub scanner: &'a str,
    /// The scan.
    pub scan_uuid: &'a str,
}

impl Event for ScanNotStored<'_> {
    /// Log it (ERROR).
    fn emit(self) {
        tracing::error!(
            target: DAEMON_TARGET,
            scan_uuid = %self.scan_uuid, scanner = %self.scanner,
            "scan NOT stored (database refuses writes during shutdown); it was not acknowledged"
        );
    }
}

/// Deciding scans failed on the local database; they stay durable.
pub struct DecidingFailed<'a> {
    /// What SQLite said.
    pub error: &'a dyn std::fmt::Display,
    /// What becomes of them.
    pub then: DecidingThen,
}

/// What becomes of scans whose decision failed ([`DecidingFailed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecidingThen {
    /// The batch is stored as pending (its decisions rolled back).
    StoredPending,
    /// Pending scans are decided again every so often.
    RetriedEvery(Duration),
}

impl Event for DecidingFailed<'_> {
    /// Log it (ERROR).
    fn emit(self) {
        let e = self.error;
        match self.then {
            DecidingThen::StoredPending => tracing::error!(
                target: OUTBOX_TARGET,
                "deciding failed; storing the scans as pending to retry: {e}"
            ),
            DecidingThen::RetriedEvery(every) => tracing::error!(
                target: DAEMON_TARGET,
                "deciding pending scans failed: {e}; they stay durable in the outbox and are retried every {every:?}"
            ),
        }
    }
}

/// The outbox takes writes again after [`OutboxWriteFailed`].
pub struct OutboxWritesAgain<'a> {
    /// The database.
    pub db: &'a std::path::Path,
    /// How many scans the batch holds.
    pub scans: usize,
}

impl Event for OutboxWritesAgain<'_> {
    /// Log it (INFO).
    fn emit(self) {
        tracing::info!(
            target: DAEMON_TARGET,
            db = %self.db.display(), scans = self.scans,
            "the outbox takes writes again: the waiting scans are stored and acknowledged"
        );
    }
}
