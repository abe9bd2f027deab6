//! Archives of the audit trail, and pruning by them (`[records]`).
//!
//! `scangate audit export --until DATE --out FILE` writes the records not
//! archived yet whose decision time is before `DATE`, with the ledger
//! entries they committed, to one self-verifying file: JSON lines, each a
//! one-key object, read with nothing but a JSON parser and SHA-256.
//!
//! ```text
//! {"archive":{"format":"scangate-audit-archive","version":1}}
//! {"record":{"seq":1,"prev_hash":"000…","hash":"9f2c…","record":{…the record, byte for byte…}}}
//! {"ledger_entry":{"entry":{…the entry as `ledger export` prints it…}}}   (after its commit record)
//! …
//! {"manifest":{"format":…,"first_seq":1,"last_seq":…,"prev_hash":…,"last_hash":…,"records":…,
//!              "ledger_entries":…,"content_sha256":…}}
//! ```
//!
//! A record's `hash` is SHA-256(`prev_hash` "\n" record) as in the
//! database; a ledger entry's SHA-256 is the `ledger_hash` of the commit
//! record before it; `content_sha256` is the SHA-256 of every byte before
//! the manifest line. [`verify_file`] checks all of it, alone (no database
//! needed); `audit verify --archive` joins the archives and the database
//! into one chain.
//!
//! `scangate audit prune` (daemon stopped) registers archives it verified
//! against the database in the `audit_archives` table, then removes
//! records that are archived, older than `[records] keep_days` and, with
//! `[redis]`, anchored in the facility store, with the ledger entries they
//! committed (never one inside the dedup horizon). It first appends a
//! checkpoint record ([`AuditPruned`](super::AuditPruned)) naming what it
//! removes and the hash of the last record removed, so the chain left in
//! the database still verifies.
//!
//! This file holds the format ([`Manifest`], its lines) and what the
//! steps share; reading archives back ([`verify_file`], [`join`]) is in
//! `verify.rs`, writing and registering them in `export.rs`, pruning in
//! `prune.rs`.

use super::AuditRecord;
use crate::model::ScanState;
use crate::store::identity::Head;
use crate::store::{Store, StoreError};
use rusqlite::OptionalExtension;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};
use std::path::PathBuf;

mod export;
mod hold;
mod prune;
mod verify;

pub use export::{check_against, export, register};
pub use prune::{PrunePolicy, Pruned, prune};
pub use verify::{Checked, Joined, join, verify_file};

/// The `format` of an archive's header and manifest.
pub const FORMAT: &str = "scangate-audit-archive";
/// The version of the format this scangate writes and reads.
pub const VERSION: u32 = 1;

/// An archive's last line: what it holds and how it links to the chain.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: String,
    /// [`VERSION`].
    pub version: u32,
    /// The gateway whose chain it is.
    pub gateway: String,
    /// The state (database) whose chain it is ([`crate::store::identity`]).
    pub state_id: Option<String>,
    /// The first record's `seq`.
    pub first_seq: i64,
    /// The last record's `seq`.
    pub last_seq: i64,
    /// The hash of the record before the first (64 zeros for record 1).
    pub prev_hash: String,
    /// The last record's hash.
    pub last_hash: String,
    /// Records in it.
    pub records: i64,
    /// Ledger entries in it.
    pub ledger_entries: i64,
    /// The first record's decision time (`at`).
    pub first_at: String,
    /// The last record's decision time.
    pub last_at: String,
    /// `--until`: every record in it was decided before this time.
    pub until: String,
    /// When it was written.
    pub exported_at: String,
    /// SHA-256 (hex) of every byte before the manifest line.
    pub content_sha256: String,
}

/// One line of an archive.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum Line {
    Archive {
        format: String,
        version: u32,
    },
    Record {
        seq: i64,
        prev_hash: String,
        hash: String,
        record: Box<RawValue>,
    },
    LedgerEntry {
        entry: Box<RawValue>,
    },
    Manifest(Box<Manifest>),
}

/// Why an archive could not be written, read, used or trusted.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The file cannot be read or written.
    #[error("archive {path}: {source}. Fix: check the path and its permissions")]
    Io {
        /// The archive file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not an intact archive: altered, truncated or not one.
    #[error("archive {path} is NOT intact: {problem}")]
    Broken {
        /// The archive file.
        path: PathBuf,
        /// What is wrong, naming the record or line.
        problem: String,
    },
    /// The command cannot do what was asked (the message says why and what to do).
    #[error("{0}")]
    Refused(String),
    /// The database.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn at_ms(at: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(at)
        .ok()
        .map(|t| t.timestamp_millis())
}

/// A local commit record: the one that appended a ledger entry.
fn commits(rec: &AuditRecord) -> bool {
    rec.decision == ScanState::Committed && rec.conflict.is_none()
}

/// Check that the database's chain and ledger are intact; refuse to
/// `what` otherwise.
fn require_intact(store: &Store, what: &str) -> Result<Head, ArchiveError> {
    let refuse = |problem: String| {
        ArchiveError::Refused(format!(
            "the database {} is not intact ({problem}); nothing was {what}. Fix: run `scangate audit verify` and resolve that first",
            store.path().display()
        ))
    };
    let head = match super::verify(store)? {
        super::Verification::Intact { records, head } => Head {
            seq: records,
            hash: head,
        },
        super::Verification::Broken { seq, problem } => {
            return Err(refuse(format!(
                "audit chain broken at record {seq}: {problem}"
            )));
        }
    };
    if let super::LedgerCheck::Broken { entry, problem } = super::verify_ledger(store)? {
        return Err(refuse(format!("ledger broken at entry {entry}: {problem}")));
    }
    Ok(head)
}

/// The hash of record `seq` in the database, if it is still there.
fn hash_at(store: &Store, seq: i64) -> Result<Option<String>, StoreError> {
    store
        .conn
        .query_row("SELECT hash FROM audit WHERE seq = ?1", [seq], |r| {
            r.get::<_, crate::store::packed::Unpacked>(0).map(|h| h.0)
        })
        .optional()
        .map_err(|e| store.err_at(e))
}
