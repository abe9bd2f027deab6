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
//! checkpoint record ([`AuditPruned`]) naming what it removes and the hash
//! of the last record removed, so the chain left in the database still
//! verifies.

use super::{AuditPruned, AuditRecord, Chain, Emitted, GENESIS, chain_hash};
use crate::model::ScanState;
use crate::store::identity::Head;
use crate::store::{Store, StoreError};
use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

/// The `format` of an archive's header and manifest.
pub const FORMAT: &str = "scangate-audit-archive";
/// The version of the format this scangate writes and reads.
pub const VERSION: u32 = 1;
/// Records removed per write transaction of a prune.
const PRUNE_CHUNK: i64 = 2000;

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

/// An archive [`verify_file`] found intact.
#[derive(Debug, Clone)]
pub struct Checked {
    /// Its manifest.
    pub manifest: Manifest,
    /// The hashes of the records asked for (`want`) that it holds.
    pub hashes: Vec<(i64, String)>,
    /// Ledger entries whose commit record predates ledger hashes (not covered).
    pub uncovered: i64,
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

/// Check the archive at `path` on its own: its header, every record's
/// hash and link, every ledger entry against its commit record, the
/// manifest against what the file holds and its content hash. Returns the
/// manifest and the hashes of the records in `want` it holds.
pub fn verify_file(path: &Path, want: &[i64]) -> Result<Checked, ArchiveError> {
    let io = |source| ArchiveError::Io {
        path: path.to_owned(),
        source,
    };
    let broken = |problem: String| ArchiveError::Broken {
        path: path.to_owned(),
        problem,
    };
    let mut reader = std::io::BufReader::new(std::fs::File::open(path).map_err(io)?);
    let mut content = Sha256::new();
    let mut buf = String::new();
    let mut n = 0usize;
    let mut manifest: Option<Manifest> = None;
    // (first seq, its prev_hash), the last record's (seq, hash, at).
    let mut first: Option<(i64, String, String)> = None;
    let mut last: Option<(i64, String, String)> = None;
    // After a local commit record: Some(its ledger hash, if it has one).
    let mut commit: Option<Option<String>> = None;
    let (mut records, mut entries, mut uncovered) = (0i64, 0i64, 0i64);
    let mut hashes = Vec::new();
    loop {
        buf.clear();
        let len = match reader.read_line(&mut buf) {
            Ok(len) => len,
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                return Err(broken(format!(
                    "line {} is not UTF-8 text: not a scangate audit archive",
                    n + 1
                )));
            }
            Err(e) => return Err(io(e)),
        };
        if len == 0 {
            break;
        }
        n += 1;
        if manifest.is_some() {
            return Err(broken(format!(
                "line {n} follows the manifest: something was appended to the archive"
            )));
        }
        let Some(text) = buf.strip_suffix('\n') else {
            return Err(broken(format!(
                "line {n} is cut off (no end of line): the file is truncated"
            )));
        };
        let line: Line = serde_json::from_str(text).map_err(|e| {
            broken(if n == 1 {
                format!("it does not begin with a scangate archive header ({e}): not a scangate audit archive")
            } else {
                format!("line {n} is not an archive line ({e}): altered or truncated")
            })
        })?;
        let missing_entry = |commit: &Option<Option<String>>,
                             last: &Option<(i64, String, String)>| {
            matches!(commit, Some(Some(_))).then(|| {
                broken(format!(
                    "the ledger entry committed by record {} is missing after it",
                    last.as_ref().map_or(0, |l| l.0)
                ))
            })
        };
        match line {
            Line::Archive { format, version } if n == 1 => {
                if format != FORMAT || version != VERSION {
                    return Err(broken(format!(
                        "it is {format:?} version {version}; this scangate reads {FORMAT:?} version {VERSION}"
                    )));
                }
            }
            _ if n == 1 => {
                return Err(broken(
                    "it does not begin with a scangate archive header: not a scangate audit archive".into(),
                ));
            }
            Line::Archive { .. } => {
                return Err(broken(format!("line {n} is a second archive header")));
            }
            Line::Record {
                seq,
                prev_hash,
                hash,
                record,
            } => {
                if let Some(e) = missing_entry(&commit, &last) {
                    return Err(e);
                }
                match &last {
                    None => first = Some((seq, prev_hash.clone(), String::new())),
                    Some((l, h, _)) => {
                        if seq != l + 1 {
                            return Err(broken(format!(
                                "record {} is missing (line {n} holds record {seq})",
                                l + 1
                            )));
                        }
                        if prev_hash != *h {
                            return Err(broken(format!(
                                "record {seq}: prev_hash does not match the hash of record {l}"
                            )));
                        }
                    }
                }
                let json = record.get();
                if chain_hash(&prev_hash, json) != hash {
                    return Err(broken(format!(
                        "record {seq}: content does not match its hash (altered)"
                    )));
                }
                let rec = match serde_json::from_str::<AuditRecord>(json) {
                    Ok(rec) if rec.seq == seq => rec,
                    Ok(rec) => {
                        return Err(broken(format!(
                            "record {seq}: it says it is record {} (altered)",
                            rec.seq
                        )));
                    }
                    Err(e) => {
                        return Err(broken(format!(
                            "record {seq}: not a valid audit record: {e}"
                        )));
                    }
                };
                commit = commits(&rec).then(|| rec.ledger_hash.clone());
                if want.contains(&seq) {
                    hashes.push((seq, hash.clone()));
                }
                if let Some(f) = first.as_mut().filter(|f| f.2.is_empty()) {
                    f.2 = rec.at.clone();
                }
                last = Some((seq, hash, rec.at));
                records += 1;
            }
            Line::LedgerEntry { entry } => {
                let after = last.as_ref().map_or(0, |l| l.0);
                match commit.take() {
                    None => {
                        return Err(broken(format!(
                            "line {n}: a ledger entry that follows no commit record (after record {after}): added"
                        )));
                    }
                    Some(None) => uncovered += 1,
                    Some(Some(h)) if h == sha256_hex(entry.get().as_bytes()) => {}
                    Some(Some(_)) => {
                        return Err(broken(format!(
                            "the ledger entry after record {after} (line {n}) is not what record {after} committed: altered"
                        )));
                    }
                }
                entries += 1;
            }
            Line::Manifest(m) => {
                if let Some(e) = missing_entry(&commit, &last) {
                    return Err(e);
                }
                let digest = hex::encode(content.clone().finalize());
                let (Some((first_seq, prev, first_at)), Some((last_seq, last_hash, last_at))) =
                    (&first, &last)
                else {
                    return Err(broken("it holds no records".into()));
                };
                let says = |what: &str, manifest: String, file: String| {
                    broken(format!(
                        "its manifest says {what} {manifest}, but the file holds {file} (altered)"
                    ))
                };
                if m.content_sha256 != digest {
                    return Err(broken(format!(
                        "its content hash is {digest}, not the manifest's {} (a line was altered, added or removed)",
                        m.content_sha256
                    )));
                }
                for (what, manifest, file) in [
                    ("first_seq", m.first_seq.to_string(), first_seq.to_string()),
                    ("last_seq", m.last_seq.to_string(), last_seq.to_string()),
                    ("prev_hash", m.prev_hash.clone(), prev.clone()),
                    ("last_hash", m.last_hash.clone(), last_hash.clone()),
                    ("records", m.records.to_string(), records.to_string()),
                    (
                        "ledger_entries",
                        m.ledger_entries.to_string(),
                        entries.to_string(),
                    ),
                    ("first_at", m.first_at.clone(), first_at.clone()),
                    ("last_at", m.last_at.clone(), last_at.clone()),
                    ("format", m.format.clone(), FORMAT.to_string()),
                ] {
                    if manifest != file {
                        return Err(says(what, manifest, file));
                    }
                }
                manifest = Some(*m);
                continue; // the manifest is not part of the content
            }
        }
        content.update(buf.as_bytes());
    }
    let Some(manifest) = manifest else {
        return Err(broken(if n == 0 {
            "it is empty: not a scangate audit archive".into()
        } else {
            format!(
                "it ends at line {n} without its manifest: the file is truncated (or was never finished)"
            )
        }));
    };
    Ok(Checked {
        manifest,
        hashes,
        uncovered,
    })
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

/// `scangate audit export --until DATE --out FILE`: write the records not
/// archived yet (after the last archive `audit prune` registered, or from
/// the first record in the database) that were decided before `until_ms`,
/// with the ledger entries they committed, to a new file `out` (never
/// overwritten: written beside it, fsynced, renamed), then read it back
/// with [`verify_file`]. Only from an intact chain. Reads only.
pub fn export(
    store: &Store,
    until_ms: i64,
    out: &Path,
    gateway: &str,
) -> Result<Manifest, ArchiveError> {
    if out.exists() {
        return Err(ArchiveError::Refused(format!(
            "archive {} exists already; scangate never overwrites an archive. Fix: name another --out file",
            out.display()
        )));
    }
    // One snapshot for the check and the export (the daemon may be writing).
    let read = store.read()?;
    require_intact(store, "archived")?;
    let state_id = store.state_id()?;
    let err = |e| store.err_at(e);
    let archived: Option<i64> = read
        .query_row("SELECT max(last_seq) FROM audit_archives", [], |r| r.get(0))
        .map_err(err)?;
    let first_live = read
        .query_row("SELECT min(seq) FROM audit", [], |r| {
            r.get::<_, Option<i64>>(0)
        })
        .map_err(err)?
        .unwrap_or(1);
    let start = first_live.max(archived.map_or(1, |a| a + 1));
    let mut q = read
        .prepare("SELECT seq, record, prev_hash, hash FROM audit WHERE seq >= ?1 ORDER BY seq")
        .map_err(err)?;
    let mut rows = q.query([start]).map_err(err)?;
    let tmp = PathBuf::from(format!("{}.partial", out.display()));
    let io = |source| ArchiveError::Io {
        path: tmp.clone(),
        source,
    };
    let file = std::fs::File::options()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(io)?;
    let mut w = std::io::BufWriter::new(file);
    let mut content = Sha256::new();
    let mut put = |w: &mut std::io::BufWriter<std::fs::File>, line: &Line| {
        let mut text = serde_json::to_string(line).expect("archive lines serialise");
        text.push('\n');
        content.update(text.as_bytes());
        w.write_all(text.as_bytes())
    };
    let outcome = (|| -> Result<Option<Manifest>, ArchiveError> {
        put(
            &mut w,
            &Line::Archive {
                format: FORMAT.into(),
                version: VERSION,
            },
        )
        .map_err(io)?;
        let mut m: Option<Manifest> = None;
        let (mut records, mut entries) = (0i64, 0i64);
        while let Some(r) = rows.next().map_err(err)? {
            let (seq, json, prev_hash, hash): (i64, String, String, String) = (
                r.get(0).map_err(err)?,
                r.get(1).map_err(err)?,
                r.get(2).map_err(err)?,
                r.get(3).map_err(err)?,
            );
            let rec: AuditRecord = serde_json::from_str(&json).map_err(|e| {
                ArchiveError::Refused(format!(
                    "audit record {seq} is unreadable ({e}); run `scangate audit verify`"
                ))
            })?;
            if at_ms(&rec.at).is_none_or(|at| at >= until_ms) {
                break;
            }
            let m = m.get_or_insert_with(|| Manifest {
                format: FORMAT.into(),
                version: VERSION,
                gateway: gateway.to_string(),
                state_id: state_id.clone(),
                first_seq: seq,
                last_seq: seq,
                prev_hash: prev_hash.clone(),
                last_hash: String::new(),
                records: 0,
                ledger_entries: 0,
                first_at: rec.at.clone(),
                last_at: String::new(),
                until: crate::capture::clock::rfc3339_ms(until_ms),
                exported_at: crate::capture::clock::rfc3339_ms(
                    chrono::Utc::now().timestamp_millis(),
                ),
                content_sha256: String::new(),
            });
            put(
                &mut w,
                &Line::Record {
                    seq,
                    prev_hash,
                    hash: hash.clone(),
                    record: RawValue::from_string(json).expect("stored records are JSON"),
                },
            )
            .map_err(io)?;
            records += 1;
            if commits(&rec)
                && let Some(e) =
                    crate::ledger::entry_for_scan(&read, &rec.scan_uuid).map_err(err)?
            {
                let entry = serde_json::to_string(&e).expect("ledger entries serialise");
                put(
                    &mut w,
                    &Line::LedgerEntry {
                        entry: RawValue::from_string(entry).expect("JSON"),
                    },
                )
                .map_err(io)?;
                entries += 1;
            }
            (m.last_seq, m.last_hash, m.last_at) = (seq, hash, rec.at);
            (m.records, m.ledger_entries) = (records, entries);
        }
        Ok(m)
    })();
    let manifest = match outcome {
        Ok(Some(mut m)) => {
            m.content_sha256 = hex::encode(content.finalize());
            m
        }
        Ok(None) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(ArchiveError::Refused(format!(
                "nothing to archive: no record from record {start} on (the first not archived yet) was decided before {}. Fix: give a later --until",
                crate::capture::clock::rfc3339_ms(until_ms)
            )));
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    let written = (|| {
        let mut text = serde_json::to_string(&Line::Manifest(Box::new(manifest.clone())))
            .expect("manifests serialise");
        text.push('\n');
        w.write_all(text.as_bytes())?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, out)?;
        if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if let Err(source) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(ArchiveError::Io {
            path: out.to_owned(),
            source,
        });
    }
    let checked = verify_file(out, &[])?;
    if checked.manifest != manifest {
        return Err(ArchiveError::Broken {
            path: out.to_owned(),
            problem: "read back, it is not what was written (the disk or file system changed it)"
                .into(),
        });
    }
    Ok(manifest)
}

/// The hash of record `seq` in the database, if it is still there.
fn hash_at(store: &Store, seq: i64) -> Result<Option<String>, StoreError> {
    store
        .conn
        .query_row("SELECT hash FROM audit WHERE seq = ?1", [seq], |r| r.get(0))
        .optional()
        .map_err(|e| store.err_at(e))
}

/// Check a verified archive against this database: the same state, and
/// where its records are still in the database, the same records (the
/// hash of its last record there, which by the chain vouches for every
/// record before it).
pub fn check_against(store: &Store, path: &Path, m: &Manifest) -> Result<(), ArchiveError> {
    let refuse = |why: String| {
        ArchiveError::Refused(format!(
            "archive {} does not belong to the database {}: {why}",
            path.display(),
            store.path().display()
        ))
    };
    let state_id = store.state_id()?;
    if m.state_id != state_id {
        return Err(refuse(format!(
            "it is the chain of state {}, the database is state {}",
            m.state_id.as_deref().unwrap_or("(none)"),
            state_id.as_deref().unwrap_or("(none)")
        )));
    }
    let first = super::first_live(store)?.map_or(i64::MAX, |f| f.0);
    for (seq, hash, what) in [
        (m.last_seq, &m.last_hash, "hash"),
        (
            m.first_seq - 1,
            &m.prev_hash,
            "hash (the archive's prev_hash)",
        ),
    ] {
        if seq >= first
            && let Some(db) = hash_at(store, seq)?
            && db != *hash
        {
            return Err(refuse(format!(
                "record {seq} has {what} {hash} in the archive and {db} in the database"
            )));
        }
    }
    Ok(())
}

/// Verify the archive at `path` ([`verify_file`]) and against the database
/// ([`check_against`]), and record it in `audit_archives`, so that
/// [`prune`] may remove what it holds. The file may be moved off the
/// gateway afterwards (keep it: it is the record).
pub fn register(store: &mut Store, path: &Path) -> Result<Manifest, ArchiveError> {
    let m = verify_file(path, &[])?.manifest;
    check_against(store, path, &m)?;
    let w = store.write()?;
    w.execute(
        "INSERT OR IGNORE INTO audit_archives (content_sha256, first_seq, last_seq, prev_hash,
             last_hash, records, ledger_entries, until, file, registered_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            m.content_sha256,
            m.first_seq,
            m.last_seq,
            m.prev_hash,
            m.last_hash,
            m.records,
            m.ledger_entries,
            m.until,
            path.display().to_string(),
            chrono::Utc::now().timestamp_millis()
        ],
    )
    .map_err(|e| w.err(e))?;
    w.commit()?;
    Ok(m)
}

/// What may be pruned, and when.
#[derive(Debug, Clone)]
pub struct PrunePolicy {
    /// Now (ms since the epoch).
    pub now_ms: i64,
    /// `[records] keep_days`.
    pub keep_days: u64,
    /// `[dedup] retention_hours`: ledger entries inside it stay (the gate
    /// looks for echoes among them).
    pub retention_hours: u64,
    /// With `[redis]`: the head anchored in the facility store (`None`
    /// inside: nothing anchored, nothing pruned). Without: `None`.
    pub facility_anchor: Option<Option<Head>>,
}

/// What [`prune`] did.
#[derive(Debug, Clone)]
pub enum Pruned {
    /// Records `first_seq..=through_seq` and the ledger entries they
    /// committed were removed; the checkpoint record says so.
    Done {
        /// The first record removed.
        first_seq: i64,
        /// The last record removed.
        through_seq: i64,
        /// Ledger entries removed.
        ledger_entries: i64,
        /// The checkpoint record (to emit and anchor).
        checkpoint: Vec<Emitted>,
    },
    /// Nothing may be pruned; why.
    Nothing(String),
}

/// Remove from the database the records that are in a registered archive
/// ([`register`]), older than `keep_days` and, with a facility store,
/// anchored there, with the ledger entries they committed — never an entry
/// inside the dedup horizon. First appends a checkpoint record naming them
/// (in its own transaction), then removes them in short transactions: an
/// interrupted prune leaves a chain that verifies, and the next one
/// finishes it. Only from an intact chain. The daemon must be stopped (it
/// holds the state directory's lock).
pub fn prune(store: &mut Store, policy: &PrunePolicy) -> Result<Pruned, ArchiveError> {
    let head = require_intact(store, "pruned")?;
    let err = |store: &Store, e| store.err_at(e);
    // A prune that was interrupted: finish it first.
    if let (Some(p), Some((first, _))) = (last_checkpoint(store)?, super::first_live(store)?)
        && first.max(p.first_seq) <= p.through_seq
    {
        remove(store, first.max(p.first_seq), p.through_seq)?;
    }
    let Some((first, _)) = super::first_live(store)? else {
        return Ok(Pruned::Nothing("the audit trail is empty".into()));
    };
    // Limit 1: archived, in consecutive registered archives from `first`.
    let archives: Vec<(String, i64, i64, String)> = {
        let mut q = store
            .conn
            .prepare(
                "SELECT content_sha256, first_seq, last_seq, last_hash FROM audit_archives
                 ORDER BY first_seq, last_seq",
            )
            .map_err(|e| err(store, e))?;
        q.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .map_err(|e| err(store, e))?
            .collect::<rusqlite::Result<_>>()
            .map_err(|e| err(store, e))?
    };
    let mut archived = first - 1;
    let mut used = Vec::new();
    for (sha, a_first, a_last, a_hash) in &archives {
        if *a_first <= archived + 1 && *a_last > archived {
            if hash_at(store, *a_last)?.is_some_and(|h| h != *a_hash) {
                return Err(ArchiveError::Refused(format!(
                    "record {a_last} of the database is not the one archive {sha} holds: the chain changed since it was archived; nothing pruned. Run `scangate audit verify`"
                )));
            }
            archived = *a_last;
            used.push(sha.clone());
        }
    }
    if archived < first {
        return Ok(Pruned::Nothing(format!(
            "record {first}, the first in the database, is in no archive registered here. Fix: `scangate audit export --until DATE --out FILE`, then `scangate audit prune --archive FILE`"
        )));
    }
    let mut limit = archived;
    let mut why = format!("archived through record {archived}");
    // Limit 2: anchored in the facility store.
    if let Some(anchor) = &policy.facility_anchor {
        if let Some(h) = anchor
            && hash_at(store, h.seq)?.is_some_and(|db| db != h.hash)
        {
            return Err(ArchiveError::Refused(format!(
                "record {} of the database is not the one the facility store anchored (hash {}): the chain was rewritten; nothing pruned. Run `scangate audit verify`",
                h.seq, h.hash
            )));
        }
        let anchored = anchor.as_ref().map_or(0, |h| h.seq).min(head.seq);
        if anchored < limit {
            limit = anchored;
            why = format!("anchored in the facility store through record {anchored}");
        }
    }
    // Limit 3: ledger entries inside the dedup horizon stay, and so do
    // the records of their scans.
    let horizon = policy.now_ms - policy.retention_hours as i64 * 3_600_000;
    for (scan, _, _) in
        crate::ledger::scans_since(&store.conn, horizon).map_err(|e| err(store, e))?
    {
        let seq: Option<i64> = store
            .conn
            .query_row(
                "SELECT min(seq) FROM audit WHERE scan_uuid = ?1",
                [&scan],
                |r| r.get(0),
            )
            .map_err(|e| err(store, e))?;
        if let Some(seq) = seq.filter(|s| *s <= limit) {
            limit = seq - 1;
            why = format!(
                "record {seq} committed a ledger entry inside the dedup horizon ([dedup] retention_hours = {})",
                policy.retention_hours
            );
        }
    }
    // Limit 4: age.
    let cutoff = policy.now_ms - policy.keep_days as i64 * 86_400_000;
    let (mut through, mut through_hash, mut entries) = (first - 1, String::new(), 0i64);
    {
        let mut q = store
            .conn
            .prepare("SELECT seq, record, hash FROM audit WHERE seq BETWEEN ?1 AND ?2 ORDER BY seq")
            .map_err(|e| err(store, e))?;
        let mut rows = q.query([first, limit]).map_err(|e| err(store, e))?;
        while let Some(r) = rows.next().map_err(|e| err(store, e))? {
            let seq: i64 = r.get(0).map_err(|e| err(store, e))?;
            let rec: AuditRecord = serde_json::from_str(
                r.get_ref(1)
                    .map_err(|e| err(store, e))?
                    .as_str()
                    .unwrap_or_default(),
            )
            .map_err(|e| {
                ArchiveError::Refused(format!(
                    "audit record {seq} is unreadable ({e}); nothing pruned"
                ))
            })?;
            if at_ms(&rec.at).is_none_or(|at| at >= cutoff) {
                why = format!(
                    "record {seq} was decided {} (less than [records] keep_days = {} days ago)",
                    rec.at, policy.keep_days
                );
                break;
            }
            if commits(&rec)
                && crate::ledger::has_entry(&store.conn, &rec.scan_uuid)
                    .map_err(|e| err(store, e))?
            {
                entries += 1;
            }
            through = seq;
            through_hash = r.get(2).map_err(|e| err(store, e))?;
        }
    }
    if through < first {
        return Ok(Pruned::Nothing(format!(
            "nothing to prune from record {first} on: {why}"
        )));
    }
    let now = crate::capture::clock::rfc3339_ms(policy.now_ms);
    let record = AuditRecord {
        seq: 0,
        at: now.clone(),
        gateway: String::new(),
        scanner: String::new(),
        scan_uuid: uuid::Uuid::now_v7().to_string(),
        captured_at: now,
        clock_synced: crate::capture::clock::CaptureTime::now().synced,
        facility_at: None,
        clock_offset_ms: None,
        clock_error_ms: None,
        decision: ScanState::Pending,
        content_key: None,
        twin_uuid: None,
        reason: Some(format!(
            "checkpoint (scangate audit prune): records {first}..={through}, decided more than {} days ago and archived, and the {entries} ledger entries they committed were removed from this database; the chain continues from record {through}'s hash. Verify them with `scangate audit verify --archive FILE…`",
            policy.keep_days
        )),
        raw_len: 0,
        conflict: None,
        state_reset: None,
        ledger_hash: None,
        pruned: Some(AuditPruned {
            first_seq: first,
            through_seq: through,
            through_hash,
            ledger_entries: entries,
            archives: used,
            keep_days: policy.keep_days,
        }),
    };
    let gateway = gateway_of_chain(store)?;
    let record = AuditRecord { gateway, ..record };
    let checkpoint = {
        let w = store.write()?;
        let mut chain = Chain::begin(&w).map_err(|e| w.err(e))?;
        chain.append(record).map_err(|e| w.err(e))?;
        let emitted = chain.finish().map_err(|e| w.err(e))?;
        w.commit()?;
        emitted
    };
    let ledger_entries = remove(store, first, through)?;
    Ok(Pruned::Done {
        first_seq: first,
        through_seq: through,
        ledger_entries,
        checkpoint,
    })
}

/// The gateway named by the chain's last record.
fn gateway_of_chain(store: &Store) -> Result<String, StoreError> {
    let rec: Option<String> = store
        .conn
        .query_row(
            "SELECT record FROM audit ORDER BY seq DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| store.err_at(e))?;
    Ok(rec
        .and_then(|r| serde_json::from_str::<AuditRecord>(&r).ok())
        .map(|r| r.gateway)
        .unwrap_or_default())
}

/// The newest checkpoint record's [`AuditPruned`], if any.
fn last_checkpoint(store: &Store) -> Result<Option<AuditPruned>, StoreError> {
    let recs = super::records_where(
        store,
        "SELECT seq, record FROM audit WHERE record LIKE '%\"pruned\":{%' ORDER BY seq DESC LIMIT 1",
        params![],
    )?;
    Ok(recs.into_iter().next().and_then(|r| r.pruned))
}

/// Remove records `from..=through` that are still here, with the ledger
/// entries they committed, [`PRUNE_CHUNK`] records per transaction.
/// Returns the ledger entries removed.
fn remove(store: &mut Store, from: i64, through: i64) -> Result<i64, StoreError> {
    let mut entries = 0;
    let mut at = from;
    while at <= through {
        let end = (at + PRUNE_CHUNK - 1).min(through);
        let w = store.write()?;
        let scans: Vec<String> = {
            let mut q = w
                .prepare_cached("SELECT record FROM audit WHERE seq BETWEEN ?1 AND ?2")
                .map_err(|e| w.err(e))?;
            q.query_map([at, end], |r| r.get::<_, String>(0))
                .map_err(|e| w.err(e))?
                .filter_map(|r| r.ok())
                .filter_map(|json| serde_json::from_str::<AuditRecord>(&json).ok())
                .filter(commits)
                .map(|r| r.scan_uuid)
                .collect()
        };
        for scan in &scans {
            entries += i64::from(crate::ledger::prune_entry(&w, scan).map_err(|e| w.err(e))?);
        }
        w.execute("DELETE FROM audit WHERE seq BETWEEN ?1 AND ?2", [at, end])
            .map_err(|e| w.err(e))?;
        w.commit()?;
        at = end + 1;
    }
    Ok(entries)
}

/// How a set of archives and the database join into one chain
/// ([`join`]): one line per finding, and whether all of it holds.
#[derive(Debug, Default)]
pub struct Joined {
    /// What was checked, for the report.
    pub lines: Vec<String>,
    /// False if a link between archives, or between them and the database, is broken.
    pub intact: bool,
}

/// Join verified archives (each [`verify_file`]d) and, if there is one,
/// the database (whose own chain [`super::verify`] found intact, first
/// record `first_live` with `prev_hash`) into one chain: the archives in
/// order from record 1, each beginning where the one before ended, and
/// the database beginning inside or right after the last. `db` gives the
/// hashes of the database's records.
pub fn join(
    archives: &[(PathBuf, Checked)],
    live: Option<(&Store, i64, &str)>,
) -> Result<Joined, ArchiveError> {
    let mut out = Joined {
        lines: Vec::new(),
        intact: true,
    };
    let mut sorted: Vec<&(PathBuf, Checked)> = archives.iter().collect();
    sorted.sort_by_key(|(_, c)| (c.manifest.first_seq, c.manifest.last_seq));
    let fail = |out: &mut Joined, line: String| {
        out.intact = false;
        out.lines.push(line);
    };
    let mut end: Option<(i64, String, &Path)> = None;
    for (path, c) in &sorted {
        let m = &c.manifest;
        match &end {
            None if m.first_seq != 1 || m.prev_hash != GENESIS => fail(
                &mut out,
                format!(
                    "archives BROKEN: the first archive given, {}, begins at record {}; records 1..={} are in no archive given",
                    path.display(),
                    m.first_seq,
                    m.first_seq - 1
                ),
            ),
            Some((last, _, before)) if m.first_seq != last + 1 => fail(
                &mut out,
                format!(
                    "archives BROKEN: {} ends at record {last} and {} begins at record {}: {}",
                    before.display(),
                    path.display(),
                    m.first_seq,
                    if m.first_seq > last + 1 {
                        format!(
                            "records {}..={} are in no archive given",
                            last + 1,
                            m.first_seq - 1
                        )
                    } else {
                        "they overlap; give each record in one archive only".to_string()
                    }
                ),
            ),
            Some((last, hash, before)) if m.prev_hash != *hash => fail(
                &mut out,
                format!(
                    "archives BROKEN: record {}, the first of {}, does not link to record {last}, the last of {} (prev_hash differs)",
                    m.first_seq,
                    path.display(),
                    before.display()
                ),
            ),
            _ => {}
        }
        end = Some((m.last_seq, m.last_hash.clone(), path.as_path()));
    }
    if let Some((store, first, first_prev)) = live {
        let state_id = store.state_id()?;
        for (path, c) in &sorted {
            if c.manifest.state_id != state_id {
                fail(
                    &mut out,
                    format!(
                        "archive {} is of state {}, not of this database (state {})",
                        path.display(),
                        c.manifest.state_id.as_deref().unwrap_or("(none)"),
                        state_id.as_deref().unwrap_or("(none)")
                    ),
                );
            }
        }
        match &end {
            None if first > 1 => out.lines.push(format!(
                "records 1..={} were pruned from the database (a checkpoint record says so); give their archives with --archive to verify them too",
                first - 1
            )),
            None => {}
            Some((last, _, path)) if *last < first - 1 => fail(
                &mut out,
                format!(
                    "archives BROKEN: the last archive given, {}, ends at record {last}; the database begins at record {first}: records {}..={} are in no archive given",
                    path.display(),
                    last + 1,
                    first - 1
                ),
            ),
            Some(_) => {
                // The record before the database's first, and every archive's
                // last record still in the database, must be the database's.
                let boundary = (first > 1).then_some(first - 1);
                if let Some(b) = boundary {
                    let held = sorted
                        .iter()
                        .find_map(|(p, c)| c.hashes.iter().find(|(s, _)| *s == b).map(|(_, h)| (p, h)));
                    match held {
                        Some((_, h)) if h == first_prev => out.lines.push(format!(
                            "archives join the database: record {b}, the last pruned, is in the archives, and record {first}, the first in the database, links to it"
                        )),
                        Some((p, _)) => fail(
                            &mut out,
                            format!(
                                "archives BROKEN at record {b}: {} holds another record {b} than the one the database's record {first} links to",
                                p.display()
                            ),
                        ),
                        None => fail(
                            &mut out,
                            format!("archives BROKEN: record {b} (before the database's first) is in no archive given"),
                        ),
                    }
                }
                for (path, c) in &sorted {
                    let m = &c.manifest;
                    if m.last_seq >= first
                        && let Some(db) = hash_at(store, m.last_seq)?
                        && db != m.last_hash
                    {
                        fail(
                            &mut out,
                            format!(
                                "archive {} BROKEN at record {}: it differs from record {} in the database",
                                path.display(),
                                m.last_seq,
                                m.last_seq
                            ),
                        );
                    }
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` records decided in 2020 (they decide no scan: enough for the chain).
    fn old_records(store: &mut Store, n: i64) {
        let w = store.write().unwrap();
        let mut chain = Chain::begin(&w).unwrap();
        for i in 0..n {
            chain
                .append(AuditRecord {
                    seq: 0,
                    at: format!("2020-01-01T00:00:{i:02}.000Z"),
                    gateway: "gw".into(),
                    scanner: "counter-1".into(),
                    scan_uuid: uuid::Uuid::now_v7().to_string(),
                    captured_at: "2020-01-01T00:00:00.000Z".into(),
                    clock_synced: true,
                    facility_at: None,
                    clock_offset_ms: None,
                    clock_error_ms: None,
                    decision: ScanState::Rejected,
                    content_key: None,
                    twin_uuid: None,
                    reason: Some("test".into()),
                    raw_len: 3,
                    conflict: None,
                    state_reset: None,
                    ledger_hash: None,
                    pruned: None,
                })
                .unwrap();
        }
        chain.finish().unwrap();
        w.commit().unwrap();
    }

    fn intact(store: &Store) -> bool {
        matches!(
            super::super::verify(store).unwrap(),
            super::super::Verification::Intact { .. }
        )
    }

    /// A prune interrupted after some of its records were removed leaves a
    /// chain that verifies (the checkpoint names the range), and the next
    /// prune finishes it. (Without a checkpoint a missing start is broken:
    /// `tests/audit_tamper.rs`.)
    #[test]
    fn an_interrupted_prune_verifies_and_the_next_one_finishes_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        old_records(&mut store, 10);
        let out = dir.path().join("a.archive");
        let until = chrono::Utc::now().timestamp_millis();
        export(&store, until, &out, "gw").unwrap();
        register(&mut store, &out).unwrap();
        // What records 6..=10 were, before the prune.
        let kept: Vec<(i64, String, String, String)> = {
            let mut q = store
                .conn
                .prepare("SELECT seq, record, prev_hash, hash FROM audit WHERE seq > 5")
                .unwrap();
            q.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        let policy = PrunePolicy {
            now_ms: until,
            keep_days: 730,
            retention_hours: 72,
            facility_anchor: None,
        };
        assert!(matches!(
            prune(&mut store, &policy).unwrap(),
            Pruned::Done {
                through_seq: 10,
                ..
            }
        ));
        assert!(intact(&store));
        // As if it had stopped after removing 1..=5: 6..=10 back.
        let put_back = |store: &mut Store| {
            let w = store.write().unwrap();
            for (seq, record, prev, hash) in &kept {
                w.execute(
                    "INSERT INTO audit (seq, scan_uuid, record, prev_hash, hash)
                     VALUES (?1, '', ?2, ?3, ?4)",
                    params![seq, record, prev, hash],
                )
                .unwrap();
            }
            w.commit().unwrap();
        };
        // (The scan_uuid column must match the record for verify.)
        put_back(&mut store);
        store
            .conn
            .execute_batch(
                "UPDATE audit SET scan_uuid = json_extract(record, '$.scan_uuid') WHERE seq <= 10",
            )
            .unwrap();
        assert_eq!(super::super::first_live(&store).unwrap().unwrap().0, 6);
        assert!(intact(&store), "a start inside the checkpoint's range");
        match prune(&mut store, &policy).unwrap() {
            Pruned::Nothing(_) => {}
            done => panic!("nothing more is archived: {done:?}"),
        }
        assert_eq!(super::super::first_live(&store).unwrap().unwrap().0, 11);
        assert!(intact(&store));
    }

    /// A file that is not an archive, or is cut short, is an error, not a panic.
    #[test]
    fn foreign_and_truncated_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x");
        for (content, says) in [
            (&b""[..], "it is empty"),
            (b"hello\n", "not a scangate audit archive"),
            (
                b"{\"archive\":{\"format\":\"scangate-audit-archive\",\"version\":1}}\n",
                "without its manifest",
            ),
            (
                b"{\"archive\":{\"format\":\"other\",\"version\":9}}\n",
                "this scangate reads",
            ),
            (
                b"{\"archive\":{\"format\":\"scangate-audit-archive\",\"version\":1}}\n{\"rec",
                "truncated",
            ),
        ] {
            std::fs::write(&path, content).unwrap();
            match verify_file(&path, &[]) {
                Err(ArchiveError::Broken { problem, .. }) => {
                    assert!(problem.contains(says), "{problem:?} should say {says:?}")
                }
                other => panic!("{content:?}: {other:?}"),
            }
        }
    }
}
