//! Writing an archive ([`export`]) and taking one in as this database's
//! ([`check_against`], [`register`]), so that [`prune`](super::prune())
//! may prune by it.

use super::{
    ArchiveError, FORMAT, Line, Manifest, VERSION, at_ms, commits, hash_at, require_intact,
    verify_file,
};
use crate::audit::stored::RecordJson;
use crate::audit::{AuditRecord, PREV_HASH};
use crate::store::packed::Unpacked;
use crate::store::{Store, StoreError};
use rusqlite::{Connection, params};
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};

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
    let start = first_to_archive(store, &read)?;
    let mut q = read
        .prepare(&format!(
            "SELECT seq, record, {PREV_HASH}, hash FROM audit WHERE seq >= ?1 ORDER BY seq"
        ))
        .map_err(err)?;
    let mut rows = q.query([start]).map_err(err)?;
    let tmp = PathBuf::from(format!("{}.partial", out.display()));
    let mut w = ArchiveFile::create(&tmp)?;
    let terms = Terms {
        gateway,
        state_id,
        until_ms,
    };
    let outcome = w.put_records(store, &read, &mut rows, &terms);
    let manifest = match outcome {
        Ok(Some(mut m)) => {
            m.content_sha256 = hex::encode(w.content.clone().finalize());
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
    w.finish(&manifest, out)?;
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

/// The first record not archived yet: after the last archive registered,
/// or the first in the database.
fn first_to_archive(store: &Store, read: &Connection) -> Result<i64, StoreError> {
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
    Ok(first_live.max(archived.map_or(1, |a| a + 1)))
}

/// What an export's manifest says besides its records: whose chain, and
/// up to when.
struct Terms<'a> {
    gateway: &'a str,
    state_id: Option<String>,
    until_ms: i64,
}

impl Terms<'_> {
    /// The manifest of an archive whose first record is `seq` (its
    /// `prev_hash`, decided `at`), before any record is counted.
    fn manifest(&self, seq: i64, prev_hash: &str, at: &str) -> Manifest {
        Manifest {
            format: FORMAT.into(),
            version: VERSION,
            gateway: self.gateway.to_string(),
            state_id: self.state_id.clone(),
            first_seq: seq,
            last_seq: seq,
            prev_hash: prev_hash.to_string(),
            last_hash: String::new(),
            records: 0,
            ledger_entries: 0,
            first_at: at.to_string(),
            last_at: String::new(),
            until: crate::capture::clock::rfc3339_ms(self.until_ms),
            exported_at: crate::capture::clock::rfc3339_ms(chrono::Utc::now().timestamp_millis()),
            content_sha256: String::new(),
        }
    }
}

/// An archive being written beside its final name (`tmp`), and the hash
/// of what is in it so far.
struct ArchiveFile {
    tmp: PathBuf,
    w: std::io::BufWriter<std::fs::File>,
    content: Sha256,
}

impl ArchiveFile {
    /// Create `tmp` (never an existing file).
    fn create(tmp: &Path) -> Result<ArchiveFile, ArchiveError> {
        let file = std::fs::File::options()
            .write(true)
            .create_new(true)
            .open(tmp)
            .map_err(|source| ArchiveError::Io {
                path: tmp.to_owned(),
                source,
            })?;
        Ok(ArchiveFile {
            tmp: tmp.to_owned(),
            w: std::io::BufWriter::new(file),
            content: Sha256::new(),
        })
    }

    /// The file cannot be written.
    fn io(&self, source: std::io::Error) -> ArchiveError {
        ArchiveError::Io {
            path: self.tmp.clone(),
            source,
        }
    }

    /// Write one line and count it in the content hash.
    fn put(&mut self, line: &Line) -> std::io::Result<()> {
        let mut text = serde_json::to_string(line).expect("archive lines serialise");
        text.push('\n');
        self.content.update(text.as_bytes());
        self.w.write_all(text.as_bytes())
    }

    /// The header, then each record of `rows` decided before the terms'
    /// `until`, each commit followed by its ledger entry. Returns the
    /// manifest so far (no content hash yet), `None` if no record was.
    fn put_records(
        &mut self,
        store: &Store,
        read: &Connection,
        rows: &mut rusqlite::Rows<'_>,
        terms: &Terms<'_>,
    ) -> Result<Option<Manifest>, ArchiveError> {
        let err = |e| store.err_at(e);
        self.put(&Line::Archive {
            format: FORMAT.into(),
            version: VERSION,
        })
        .map_err(|e| self.io(e))?;
        let mut m: Option<Manifest> = None;
        let (mut records, mut entries) = (0i64, 0i64);
        while let Some(r) = rows.next().map_err(err)? {
            let (seq, RecordJson(json), Unpacked(prev_hash), Unpacked(hash)) = (
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
            if at_ms(&rec.at).is_none_or(|at| at >= terms.until_ms) {
                break;
            }
            let m = m.get_or_insert_with(|| terms.manifest(seq, &prev_hash, &rec.at));
            self.put(&Line::Record {
                seq,
                prev_hash,
                hash: hash.clone(),
                record: RawValue::from_string(json).expect("stored records are JSON"),
            })
            .map_err(|e| self.io(e))?;
            records += 1;
            if commits(&rec)
                && let Some(e) = crate::ledger::entry_for_scan(read, &rec.scan_uuid).map_err(err)?
            {
                let entry = serde_json::to_string(&e).expect("ledger entries serialise");
                self.put(&Line::LedgerEntry {
                    entry: RawValue::from_string(entry).expect("JSON"),
                })
                .map_err(|e| self.io(e))?;
                entries += 1;
            }
            (m.last_seq, m.last_hash, m.last_at) = (seq, hash, rec.at);
            (m.records, m.ledger_entries) = (records, entries);
        }
        Ok(m)
    }

    /// Write the manifest line, fsync the file, rename it to `out` and
    /// fsync its directory; on failure the partial file is removed.
    fn finish(self, manifest: &Manifest, out: &Path) -> Result<(), ArchiveError> {
        let ArchiveFile { tmp, mut w, .. } = self;
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
        Ok(())
    }
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
    let first = crate::audit::first_live(store)?.map_or(i64::MAX, |f| f.0);
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
/// [`prune`](super::prune()) may remove what it holds. The file may be
/// moved off the gateway afterwards (keep it: it is the record).
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
