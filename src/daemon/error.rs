//! Why the daemon could not run, or stopped on a failure: each message
//! says what happened, to what, and what to do next.

use crate::store::StoreError;
use std::path::PathBuf;

/// Why the daemon could not run.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The database or state directory is unusable.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// `[metrics] listen` cannot be bound.
    #[error(transparent)]
    MetricsListen(#[from] super::metrics_http::BindError),
    /// The facility Redis is reachable but set up so that claims could be
    /// lost (e.g. it may evict keys), or refuses this gateway (credentials,
    /// a grant, its settings): [`crate::facility::FacilityError::needs_technician`].
    #[error("{0}")]
    Facility(crate::facility::FacilityError),
    /// The outbox writer thread died.
    #[error("the outbox writer thread panicked; state is safe in {0}, restart the service")]
    WriterPanicked(PathBuf),
    /// A thread of the facility claimer died.
    #[error(
        "a thread of the facility claimer panicked; scans are safe in {0} and are claimed after a restart of the service"
    )]
    ClaimerPanicked(PathBuf),
    /// The raw-bytes sweeper's thread died (a bug): raw bytes would stay,
    /// and the page check might not have run.
    #[error(
        "the raw-bytes sweeper stopped unexpectedly ({0}); scangate stopped so that it is restarted. Scans are safe in the outbox"
    )]
    SweeperPanicked(String),
    /// A `[[sink]]`'s thread died (a bug): its batches would wait.
    #[error(
        "a sink's thread stopped unexpectedly ({0}); scangate stopped so that it is restarted. Nothing is lost: the sink sends from its cursor again"
    )]
    SinkEnded(String),
    /// A scanner's task ended while the daemon ran (a bug: it should
    /// reconnect by itself until shutdown).
    #[error(
        "a scanner task ended unexpectedly ({0}); scangate stopped so that it is restarted with every scanner. Scans already read are safe in the outbox"
    )]
    SourceEnded(String),
    /// The integrity check that runs after start found the database
    /// corrupt; the daemon stopped.
    #[error(
        "database {path} failed its integrity check after start ({detail}); scangate stopped. Scans read since start were written to it. Fix: move the file aside for investigation (sqlite3's `.recover` can salvage rows), restore a backup, then start scangate again"
    )]
    CorruptWhileRunning {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        detail: String,
    },
    /// Shutdown came while the database refused writes: these scans were
    /// read, never acknowledged, and could not be stored.
    #[error(
        "{count} scan(s) read during shutdown could not be written to {path} (see the errors above) and were not acknowledged; check the disk, then restart"
    )]
    Undurable {
        /// How many.
        count: usize,
        /// The database.
        path: PathBuf,
    },
}

impl From<crate::claimer::StartError> for DaemonError {
    fn from(e: crate::claimer::StartError) -> DaemonError {
        match e {
            crate::claimer::StartError::Facility(e) => DaemonError::Facility(e),
            crate::claimer::StartError::Store(e) => DaemonError::Store(e),
        }
    }
}
