//! Checking the audit trail: the chain itself ([`verify()`]), its head
//! against one anchored outside the database ([`check_anchor`]), and the
//! ledger against the commit records ([`verify_ledger`]).

use super::stored::record_json;
use super::trace::{for_each_record, records_for_scan};
use super::{AuditRecord, GENESIS, chain_hash};
use crate::model::ScanState;
use crate::store::identity::AUDIT_HEAD_KEY as HEAD_KEY;
use crate::store::packed::{Unpacked, unpack};
use crate::store::{Store, StoreError};
use rusqlite::OptionalExtension;
use rusqlite::types::ValueRef;
use std::ops::ControlFlow;

/// Result of verifying the chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verification {
    /// Every record is intact.
    Intact {
        /// Number of records.
        records: i64,
        /// Hash of the last record.
        head: String,
    },
    /// The first broken record.
    Broken {
        /// Its position.
        seq: i64,
        /// What is wrong with it.
        problem: String,
    },
}

/// The first record still in the database and the hash it links to: its
/// `prev_hash` (the hash of the last record pruned before it), 64 zeros
/// for record 1, `None` where neither is stored (its predecessor was
/// removed outside `audit prune`). `None` for an empty chain.
pub fn first_live(store: &Store) -> Result<Option<(i64, Option<String>)>, StoreError> {
    let first: Option<(i64, Option<Unpacked>)> = store
        .conn
        .query_row(
            "SELECT seq, prev_hash FROM audit ORDER BY seq LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(|e| store.err_at(e))?;
    Ok(first.map(|(seq, prev)| {
        let prev = prev.map(|p| p.0);
        (
            seq,
            prev.or_else(|| (seq == 1).then(|| GENESIS.to_string())),
        )
    }))
}

/// Walk the whole chain and report the first broken record. A database
/// whose first records were pruned (`audit prune`) is walked from the first
/// record kept, which must be named by a checkpoint record in the chain
/// ([`AuditPruned`](super::AuditPruned)); the pruned records are checked
/// with their archives ([`archive::verify_file`](super::archive::verify_file)).
pub fn verify(store: &Store) -> Result<Verification, StoreError> {
    // Where the live chain starts: record 1 after the genesis hash, or the
    // first record kept after a prune (checked below against its checkpoint).
    let start = first_live(store)?.filter(|(seq, _)| *seq > 1);
    let Walked {
        last,
        prev,
        checkpoint_seen,
    } = match walk(store, &start)? {
        ControlFlow::Continue(walked) => walked,
        ControlFlow::Break(broken) => return Ok(broken),
    };
    if let Some((first, _)) = start.as_ref().filter(|_| !checkpoint_seen) {
        return Ok(Verification::Broken {
            seq: 1,
            problem: format!(
                "record 1 is missing (the next one is {first}), and no checkpoint record says records 1..={} were pruned into an archive",
                first - 1
            ),
        });
    }
    if let Some((first, None)) = start {
        return Ok(Verification::Broken {
            seq: first,
            problem: format!(
                "record {first} links to nothing (no prev_hash): record {} was removed outside `scangate audit prune`",
                first - 1
            ),
        });
    }
    check_head(store, last, prev)
}

/// Where [`walk`] ended: the last record, its hash, and whether a
/// checkpoint record names the pruned start.
struct Walked {
    last: i64,
    prev: String,
    checkpoint_seen: bool,
}

/// Read the records in order from `start` (the first kept after a prune,
/// else record 1): each in its place, linked to the one before, matching
/// its hash and its indexed column. `Break`: the first broken record.
fn walk(
    store: &Store,
    start: &Option<(i64, Option<String>)>,
) -> Result<ControlFlow<Verification, Walked>, StoreError> {
    let err = |e| store.err_at(e);
    let mut checkpoint_seen = false;
    let unmatched = unmatched_keys(store)?;
    let mut q = store
        .conn
        .prepare("SELECT seq, scan_uuid, record, prev_hash, hash FROM audit ORDER BY seq")
        .map_err(err)?;
    let mut rows = q.query([]).map_err(err)?;
    // The hash the next record links to (`None`: the first record kept
    // names none; it is reported after the walk).
    let (mut expected, mut prev) = match start {
        Some((seq, prev_hash)) => (*seq, prev_hash.clone()),
        None => (1, Some(GENESIS.to_string())),
    };
    while let Some(r) = rows.next().map_err(err)? {
        let seq: i64 = r.get(0).map_err(err)?;
        let broken = |problem: String| {
            Ok(ControlFlow::Break(Verification::Broken {
                seq: expected,
                problem,
            }))
        };
        if seq != expected {
            return broken(format!(
                "record {expected} is missing (the next one is {seq})"
            ));
        }
        let column = |i: usize| r.get_ref(i).map_err(err);
        let uuid = unpack(column(1)?).ok();
        let record = match record_json(column(2)?) {
            Ok(record) => record,
            Err(e) => return broken(format!("record {seq}: not a valid audit record: {e}")),
        };
        // NULL: the hash of the record before, as written.
        let prev_hash = match column(3)? {
            ValueRef::Null => prev.clone(),
            v => Some(unpack(v).unwrap_or_default()),
        };
        let hash = unpack(column(4)?).unwrap_or_default();
        if prev.is_some() && prev_hash != prev {
            return broken(format!(
                "record {seq}: prev_hash does not match the hash of record {}",
                seq - 1
            ));
        }
        if let Some(prev_hash) = &prev_hash
            && chain_hash(prev_hash, &record) != hash
        {
            return broken(format!(
                "record {seq}: content does not match its hash (altered)"
            ));
        }
        match serde_json::from_str::<AuditRecord>(&record) {
            Ok(rec)
                if rec.seq == seq
                    && uuid.as_ref() == Some(&rec.scan_uuid)
                    && !unmatched.contains(&seq) =>
            {
                // The checkpoint that removed the records before `first`
                // (all of them, or, while a prune is interrupted, some).
                if let (Some(p), Some((first, first_prev))) = (&rec.pruned, start) {
                    let before = first - 1;
                    checkpoint_seen |= (p.first_seq..p.through_seq).contains(&before)
                        || (before == p.through_seq
                            && first_prev.as_deref() == Some(p.through_hash.as_str()));
                }
            }
            Ok(_) => {
                return broken(format!(
                    "record {seq}: indexed columns do not match the hashed record (altered)"
                ));
            }
            Err(e) => return broken(format!("record {seq}: not a valid audit record: {e}")),
        }
        prev = Some(hash);
        expected += 1;
    }
    let last = expected - 1;
    Ok(ControlFlow::Continue(Walked {
        last,
        prev: prev.unwrap_or_default(),
        checkpoint_seen,
    }))
}

/// The records whose `content_key` column differed from their record
/// when migration 8 dropped the column (normally none): still named as
/// altered.
fn unmatched_keys(store: &Store) -> Result<std::collections::BTreeSet<i64>, StoreError> {
    let err = |e| store.err_at(e);
    let mut q = store
        .conn
        .prepare("SELECT seq FROM audit_unmatched_keys")
        .map_err(err)?;
    q.query_map([], |r| r.get(0))
        .map_err(err)?
        .collect::<rusqlite::Result<_>>()
        .map_err(err)
}

/// Compare the chain walked (`last` records, the last one's hash `prev`)
/// with the head recorded in `meta`: a deleted tail, or a record appended
/// or altered at the end, is noticed here.
fn check_head(store: &Store, last: i64, prev: String) -> Result<Verification, StoreError> {
    if let Some(head) = store.meta(HEAD_KEY)? {
        let (head_seq, head_hash) = head.split_once(' ').unwrap_or(("", ""));
        let head_seq: i64 = head_seq.parse().unwrap_or(-1);
        if head_seq > last {
            return Ok(Verification::Broken {
                seq: last + 1,
                problem: format!(
                    "records {}..={head_seq} are missing (the chain head says {head_seq})",
                    last + 1
                ),
            });
        }
        if last > head_seq {
            return Ok(Verification::Broken {
                seq: head_seq + 1,
                problem: format!(
                    "record {} is past the recorded chain head ({head_seq}): appended outside scangate",
                    head_seq + 1
                ),
            });
        }
        if head_hash != prev {
            return Ok(Verification::Broken {
                seq: last,
                problem: format!("record {last}: hash does not match the recorded chain head"),
            });
        }
    } else if last > 0 {
        return Ok(Verification::Broken {
            seq: last,
            problem: "the chain head record is missing from meta".into(),
        });
    }
    Ok(Verification::Intact {
        records: last,
        head: prev,
    })
}

/// Compare the chain (intact, `records` long) with a head anchored outside
/// the database by `by` (e.g. "the facility store"): `Some(problem)` if
/// the database lost its tail or the anchored record differs.
pub fn check_anchor(
    store: &Store,
    records: i64,
    by: &str,
    head: &crate::store::identity::Head,
) -> Result<Option<String>, StoreError> {
    if head.seq > records {
        return Ok(Some(format!(
            "the database ends at record {records}; {by} saw record {}: records {}..={} are lost (with the ledger entries and decisions they recorded)",
            head.seq,
            records + 1,
            head.seq
        )));
    }
    if let Some((first, first_prev)) = first_live(store)?
        && head.seq < first
    {
        // Pruned (`verify` checked the checkpoint that says so); its
        // archive holds it. The boundary record's hash is still here.
        return Ok((head.seq == first - 1 && first_prev.as_deref() != Some(head.hash.as_str())).then(|| {
            format!(
                "record {} is not the one {by} saw (hash {}): the chain was rewritten from there or before",
                head.seq, head.hash
            )
        }));
    }
    let hash: Option<String> = store
        .conn
        .query_row("SELECT hash FROM audit WHERE seq = ?1", [head.seq], |r| {
            r.get::<_, Unpacked>(0).map(|h| h.0)
        })
        .optional()
        .map_err(|e| store.err_at(e))?;
    Ok((hash.as_deref() != Some(head.hash.as_str())).then(|| {
        format!(
            "record {} is not the one {by} saw (hash {}): the chain was rewritten from there or before",
            head.seq, head.hash
        )
    }))
}

/// Result of checking the ledger against the chain ([`verify_ledger`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerCheck {
    /// Every entry is as its commit record recorded it, and every commit
    /// record's entry is there.
    Intact {
        /// Entries checked.
        entries: i64,
        /// Entries whose commit record predates ledger hashes (not covered).
        uncovered: i64,
    },
    /// The first entry that differs from the chain.
    Broken {
        /// Its ledger position (`seq`), or for a missing entry the audit
        /// record of its commit.
        entry: i64,
        /// What is wrong.
        problem: String,
    },
}

/// Check every ledger entry, as `ledger export` prints it, against the
/// `ledger_hash` its commit record holds, and that every such record's
/// entry is in the ledger. Run it on a chain [`verify`] found intact (the
/// records are then trusted). Names the first entry that differs.
pub fn verify_ledger(store: &Store) -> Result<LedgerCheck, StoreError> {
    let (mut entries, mut uncovered, mut covered) = (0i64, 0i64, 0i64);
    let mut broken: Option<(i64, String)> = None;
    let mut failed: Option<StoreError> = None;
    crate::ledger::for_each(store, None, |e| {
        entries += 1;
        let records = match records_for_scan(store, &e.scan_uuid) {
            Ok(r) => r,
            Err(err) => {
                failed = Some(err);
                return Err(std::io::Error::other("stop"));
            }
        };
        let commit = records
            .iter()
            .filter(|r| r.decision == ScanState::Committed && r.conflict.is_none())
            .max_by_key(|r| r.ledger_hash.is_some());
        match commit {
            None => {
                broken = Some((
                    e.seq,
                    format!(
                        "ledger entry {} (scan {}) has no commit record in the audit trail: added or altered outside scangate",
                        e.seq, e.scan_uuid
                    ),
                ))
            }
            Some(c) => match &c.ledger_hash {
                None => uncovered += 1,
                Some(h) if *h == crate::ledger::entry_hash(&e) => covered += 1,
                Some(_) => {
                    broken = Some((
                        e.seq,
                        format!(
                            "ledger entry {} (scan {}) is not what its commit, audit record {}, recorded: altered",
                            e.seq, e.scan_uuid, c.seq
                        ),
                    ))
                }
            },
        }
        if broken.is_some() {
            return Err(std::io::Error::other("stop"));
        }
        Ok(())
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    if let Some((entry, problem)) = broken {
        return Ok(LedgerCheck::Broken { entry, problem });
    }
    // Every commit record that names an entry: as many as matched one.
    let mut recorded = 0i64;
    for_each_record(store, |rec| {
        recorded += i64::from(rec.ledger_hash.is_some())
    })?;
    if recorded != covered {
        let (mut missing, mut failed) = (None, None);
        for_each_record(store, |rec| {
            if missing.is_some() || failed.is_some() || rec.ledger_hash.is_none() {
                return;
            }
            match crate::ledger::has_entry(&store.conn, &rec.scan_uuid) {
                Ok(true) => {}
                Ok(false) => missing = Some((rec.seq, rec.scan_uuid)),
                Err(e) => failed = Some(e),
            }
        })?;
        if let Some(e) = failed {
            return Err(store.err_at(e));
        }
        if let Some((seq, scan)) = missing {
            return Ok(LedgerCheck::Broken {
                entry: seq,
                problem: format!(
                    "the ledger entry of scan {scan}, committed by audit record {seq}, is missing from the ledger"
                ),
            });
        }
        return Ok(LedgerCheck::Broken {
            entry: 0,
            problem: format!(
                "{recorded} commit records name a ledger entry, but {covered} entries match one"
            ),
        });
    }
    Ok(LedgerCheck::Intact { entries, uncovered })
}
