//! Reading archives back: [`verify_file`] checks one on its own (no
//! database needed), [`join`] joins several and the database into one
//! chain (`audit verify --archive`).

use super::{ArchiveError, FORMAT, Line, Manifest, VERSION, commits, hash_at, sha256_hex};
use crate::audit::{AuditRecord, GENESIS, chain_hash};
use crate::store::Store;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};
use std::io::BufRead;
use std::path::{Path, PathBuf};

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

/// Check the archive at `path` on its own: its header, every record's
/// hash and link, every ledger entry against its commit record, the
/// manifest against what the file holds and its content hash. Returns the
/// manifest and the hashes of the records in `want` it holds.
pub fn verify_file(path: &Path, want: &[i64]) -> Result<Checked, ArchiveError> {
    let mut file = FileCheck::new(path, want);
    let mut reader = std::io::BufReader::new(std::fs::File::open(path).map_err(|e| file.io(e))?);
    let mut buf = String::new();
    let mut n = 0usize;
    let mut manifest: Option<Manifest> = None;
    while let Some(line) = file.next_line(&mut reader, &mut buf, &mut n, manifest.is_some())? {
        match line {
            Line::Archive { format, version } if n == 1 => file.header(format, version)?,
            _ if n == 1 => {
                return Err(file.broken(
                    "it does not begin with a scangate archive header: not a scangate audit archive".into(),
                ));
            }
            Line::Archive { .. } => {
                return Err(file.broken(format!("line {n} is a second archive header")));
            }
            Line::Record {
                seq,
                prev_hash,
                hash,
                record,
            } => file.record(n, seq, prev_hash, hash, &record)?,
            Line::LedgerEntry { entry } => file.ledger_entry(n, &entry)?,
            Line::Manifest(m) => {
                manifest = Some(file.manifest(m)?);
                continue; // the manifest is not part of the content
            }
        }
        file.content.update(buf.as_bytes());
    }
    file.finish(manifest, n)
}

/// What [`verify_file`] has read of an archive so far.
struct FileCheck<'a> {
    path: &'a Path,
    /// The records whose hashes are asked for.
    want: &'a [i64],
    /// SHA-256 of every line before the manifest.
    content: Sha256,
    /// (first seq, its prev_hash, its at).
    first: Option<(i64, String, String)>,
    /// The last record's (seq, hash, at).
    last: Option<(i64, String, String)>,
    /// After a local commit record: Some(its ledger hash, if it has one).
    commit: Option<Option<String>>,
    records: i64,
    entries: i64,
    uncovered: i64,
    hashes: Vec<(i64, String)>,
}

impl<'a> FileCheck<'a> {
    /// Nothing read yet.
    fn new(path: &'a Path, want: &'a [i64]) -> FileCheck<'a> {
        FileCheck {
            path,
            want,
            content: Sha256::new(),
            first: None,
            last: None,
            commit: None,
            records: 0,
            entries: 0,
            uncovered: 0,
            hashes: Vec::new(),
        }
    }

    /// The file cannot be read.
    fn io(&self, source: std::io::Error) -> ArchiveError {
        ArchiveError::Io {
            path: self.path.to_owned(),
            source,
        }
    }

    /// The file is not an intact archive: `problem` says why.
    fn broken(&self, problem: String) -> ArchiveError {
        ArchiveError::Broken {
            path: self.path.to_owned(),
            problem,
        }
    }

    /// Read the next line into `buf` (counting it in `n`) and parse it;
    /// `None` at the end of the file. A line after the manifest, one cut
    /// off, or one that is not an archive line is an error.
    fn next_line(
        &self,
        reader: &mut impl BufRead,
        buf: &mut String,
        n: &mut usize,
        after_manifest: bool,
    ) -> Result<Option<Line>, ArchiveError> {
        buf.clear();
        let len = match reader.read_line(buf) {
            Ok(len) => len,
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                return Err(self.broken(format!(
                    "line {} is not UTF-8 text: not a scangate audit archive",
                    *n + 1
                )));
            }
            Err(e) => return Err(self.io(e)),
        };
        if len == 0 {
            return Ok(None);
        }
        *n += 1;
        let n = *n;
        if after_manifest {
            return Err(self.broken(format!(
                "line {n} follows the manifest: something was appended to the archive"
            )));
        }
        let Some(text) = buf.strip_suffix('\n') else {
            return Err(self.broken(format!(
                "line {n} is cut off (no end of line): the file is truncated"
            )));
        };
        let line: Line = serde_json::from_str(text).map_err(|e| {
            self.broken(if n == 1 {
                format!("it does not begin with a scangate archive header ({e}): not a scangate audit archive")
            } else {
                format!("line {n} is not an archive line ({e}): altered or truncated")
            })
        })?;
        Ok(Some(line))
    }

    /// The header (line 1): this format and version.
    fn header(&self, format: String, version: u32) -> Result<(), ArchiveError> {
        if format != FORMAT || version != VERSION {
            return Err(self.broken(format!(
                "it is {format:?} version {version}; this scangate reads {FORMAT:?} version {VERSION}"
            )));
        }
        Ok(())
    }

    /// After a commit record that has a ledger hash, its entry must follow.
    fn missing_entry(&self) -> Option<ArchiveError> {
        matches!(self.commit, Some(Some(_))).then(|| {
            self.broken(format!(
                "the ledger entry committed by record {} is missing after it",
                self.last.as_ref().map_or(0, |l| l.0)
            ))
        })
    }

    /// A record line (line `n`): in its place, linked to the one before,
    /// matching its hash, and saying it is the record it is.
    fn record(
        &mut self,
        n: usize,
        seq: i64,
        prev_hash: String,
        hash: String,
        record: &RawValue,
    ) -> Result<(), ArchiveError> {
        if let Some(e) = self.missing_entry() {
            return Err(e);
        }
        match &self.last {
            None => self.first = Some((seq, prev_hash.clone(), String::new())),
            Some((l, h, _)) => {
                if seq != l + 1 {
                    return Err(self.broken(format!(
                        "record {} is missing (line {n} holds record {seq})",
                        l + 1
                    )));
                }
                if prev_hash != *h {
                    return Err(self.broken(format!(
                        "record {seq}: prev_hash does not match the hash of record {l}"
                    )));
                }
            }
        }
        let json = record.get();
        if chain_hash(&prev_hash, json) != hash {
            return Err(self.broken(format!(
                "record {seq}: content does not match its hash (altered)"
            )));
        }
        let rec = match serde_json::from_str::<AuditRecord>(json) {
            Ok(rec) if rec.seq == seq => rec,
            Ok(rec) => {
                return Err(self.broken(format!(
                    "record {seq}: it says it is record {} (altered)",
                    rec.seq
                )));
            }
            Err(e) => {
                return Err(self.broken(format!("record {seq}: not a valid audit record: {e}")));
            }
        };
        self.commit = commits(&rec).then(|| rec.ledger_hash.clone());
        if self.want.contains(&seq) {
            self.hashes.push((seq, hash.clone()));
        }
        if let Some(f) = self.first.as_mut().filter(|f| f.2.is_empty()) {
            f.2 = rec.at.clone();
        }
        self.last = Some((seq, hash, rec.at));
        self.records += 1;
        Ok(())
    }

    /// A ledger entry line (line `n`): right after the commit record that
    /// appended it, and what that record's ledger hash says.
    fn ledger_entry(&mut self, n: usize, entry: &RawValue) -> Result<(), ArchiveError> {
        let after = self.last.as_ref().map_or(0, |l| l.0);
        match self.commit.take() {
            None => {
                return Err(self.broken(format!(
                    "line {n}: a ledger entry that follows no commit record (after record {after}): added"
                )));
            }
            Some(None) => self.uncovered += 1,
            Some(Some(h)) if h == sha256_hex(entry.get().as_bytes()) => {}
            Some(Some(_)) => {
                return Err(self.broken(format!(
                    "the ledger entry after record {after} (line {n}) is not what record {after} committed: altered"
                )));
            }
        }
        self.entries += 1;
        Ok(())
    }

    /// The manifest line: the content hash of every line before it, and
    /// each of its figures against what the file holds.
    fn manifest(&self, m: Box<Manifest>) -> Result<Manifest, ArchiveError> {
        if let Some(e) = self.missing_entry() {
            return Err(e);
        }
        let digest = hex::encode(self.content.clone().finalize());
        let (Some((first_seq, prev, first_at)), Some((last_seq, last_hash, last_at))) =
            (&self.first, &self.last)
        else {
            return Err(self.broken("it holds no records".into()));
        };
        let says = |what: &str, manifest: String, file: String| {
            self.broken(format!(
                "its manifest says {what} {manifest}, but the file holds {file} (altered)"
            ))
        };
        if m.content_sha256 != digest {
            return Err(self.broken(format!(
                "its content hash is {digest}, not the manifest's {} (a line was altered, added or removed)",
                m.content_sha256
            )));
        }
        for (what, manifest, file) in [
            ("first_seq", m.first_seq.to_string(), first_seq.to_string()),
            ("last_seq", m.last_seq.to_string(), last_seq.to_string()),
            ("prev_hash", m.prev_hash.clone(), prev.clone()),
            ("last_hash", m.last_hash.clone(), last_hash.clone()),
            ("records", m.records.to_string(), self.records.to_string()),
            (
                "ledger_entries",
                m.ledger_entries.to_string(),
                self.entries.to_string(),
            ),
            ("first_at", m.first_at.clone(), first_at.clone()),
            ("last_at", m.last_at.clone(), last_at.clone()),
            ("format", m.format.clone(), FORMAT.to_string()),
        ] {
            if manifest != file {
                return Err(says(what, manifest, file));
            }
        }
        Ok(*m)
    }

    /// The end of the file (`n` lines): it must have ended with its manifest.
    fn finish(self, manifest: Option<Manifest>, n: usize) -> Result<Checked, ArchiveError> {
        let Some(manifest) = manifest else {
            return Err(self.broken(if n == 0 {
                "it is empty: not a scangate audit archive".into()
            } else {
                format!(
                    "it ends at line {n} without its manifest: the file is truncated (or was never finished)"
                )
            }));
        };
        Ok(Checked {
            manifest,
            hashes: self.hashes,
            uncovered: self.uncovered,
        })
    }
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

impl Joined {
    /// A broken link: said, and the whole not intact.
    fn fail(&mut self, line: String) {
        self.intact = false;
        self.lines.push(line);
    }
}

/// Join verified archives (each [`verify_file`]d) and, if there is one,
/// the database (whose own chain [`crate::audit::verify()`] found intact, first
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
    let end = link_archives(&mut out, &sorted);
    if let Some((store, first, first_prev)) = live {
        check_states(&mut out, &sorted, store)?;
        join_database(&mut out, &sorted, &end, store, first, first_prev)?;
    }
    Ok(out)
}

/// The archives in order: the first from record 1, each beginning where
/// the one before ended. Returns where the last ends (its last record,
/// that record's hash, the file).
fn link_archives<'a>(
    out: &mut Joined,
    sorted: &[&'a (PathBuf, Checked)],
) -> Option<(i64, String, &'a Path)> {
    let mut end: Option<(i64, String, &Path)> = None;
    for (path, c) in sorted {
        let m = &c.manifest;
        match &end {
            None if m.first_seq != 1 || m.prev_hash != GENESIS => out.fail(
                format!(
                    "archives BROKEN: the first archive given, {}, begins at record {}; records 1..={} are in no archive given",
                    path.display(),
                    m.first_seq,
                    m.first_seq - 1
                ),
            ),
            Some((last, _, before)) if m.first_seq != last + 1 => out.fail(
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
            Some((last, hash, before)) if m.prev_hash != *hash => out.fail(
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
    end
}

/// Every archive must be of the database's state.
fn check_states(
    out: &mut Joined,
    sorted: &[&(PathBuf, Checked)],
    store: &Store,
) -> Result<(), ArchiveError> {
    let state_id = store.state_id()?;
    for (path, c) in sorted {
        if c.manifest.state_id != state_id {
            out.fail(format!(
                "archive {} is of state {}, not of this database (state {})",
                path.display(),
                c.manifest.state_id.as_deref().unwrap_or("(none)"),
                state_id.as_deref().unwrap_or("(none)")
            ));
        }
    }
    Ok(())
}

/// The database (first record `first`, linking to `first_prev`) must
/// begin inside or right after the last archive (`end`).
fn join_database(
    out: &mut Joined,
    sorted: &[&(PathBuf, Checked)],
    end: &Option<(i64, String, &Path)>,
    store: &Store,
    first: i64,
    first_prev: &str,
) -> Result<(), ArchiveError> {
    match end {
        None if first > 1 => out.lines.push(format!(
            "records 1..={} were pruned from the database (a checkpoint record says so); give their archives with --archive to verify them too",
            first - 1
        )),
        None => {}
        Some((last, _, path)) if *last < first - 1 => out.fail(
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
            check_boundary(out, sorted, first, first_prev);
            check_last_records(out, sorted, store, first)?;
        }
    }
    Ok(())
}

/// The record before the database's first (if it is not record 1) is in
/// the archives, and is the one the database's first links to.
fn check_boundary(out: &mut Joined, sorted: &[&(PathBuf, Checked)], first: i64, first_prev: &str) {
    let boundary = (first > 1).then_some(first - 1);
    if let Some(b) = boundary {
        let held = sorted
            .iter()
            .find_map(|(p, c)| c.hashes.iter().find(|(s, _)| *s == b).map(|(_, h)| (p, h)));
        match held {
            Some((_, h)) if h == first_prev => out.lines.push(format!(
                "archives join the database: record {b}, the last pruned, is in the archives, and record {first}, the first in the database, links to it"
            )),
            Some((p, _)) => out.fail(
                format!(
                    "archives BROKEN at record {b}: {} holds another record {b} than the one the database's record {first} links to",
                    p.display()
                ),
            ),
            None => out.fail(
                format!("archives BROKEN: record {b} (before the database's first) is in no archive given"),
            ),
        }
    }
}

/// Every archive's last record that is still in the database is the
/// database's.
fn check_last_records(
    out: &mut Joined,
    sorted: &[&(PathBuf, Checked)],
    store: &Store,
    first: i64,
) -> Result<(), ArchiveError> {
    for (path, c) in sorted {
        let m = &c.manifest;
        if m.last_seq >= first
            && let Some(db) = hash_at(store, m.last_seq)?
            && db != m.last_hash
        {
            out.fail(format!(
                "archive {} BROKEN at record {}: it differs from record {} in the database",
                path.display(),
                m.last_seq,
                m.last_seq
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
