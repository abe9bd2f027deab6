//! Audit trail: one PHI-free, hash-chained record per decision (invariant 8).
//!
//! Each record is canonical JSON (fixed field order, no whitespace), and
//! `hash = SHA-256(prev_hash || "\n" || record)` in lowercase hex; the first
//! record's `prev_hash` is 64 zeros. Records are written in the decision's own
//! transaction, and the chain head (`seq hash`) is kept in `meta` so that a
//! deleted tail is noticed too. After commit every record is also emitted
//! through `tracing` (target `scangate::audit`), which puts a copy of each
//! hash into the journal, outside the database.
//!
//! What a record holds: identifiers (scan UUID, scanner, gateway), times, the
//! decision, the content key (a hash), the committed twin, the rejection reason
//! and the frame length. Never the scanned bytes: a misread patient wristband
//! must not leak into the trail, and rejection reasons are written without
//! the data.

use crate::model::ScanState;
use crate::outbox::{self};
use crate::store::{Store, StoreError};
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub mod archive;
pub mod reset;

pub(crate) const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
use crate::store::identity::AUDIT_HEAD_KEY as HEAD_KEY;

/// One audit record. Field order is the canonical order.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AuditRecord {
    /// Position in the chain (1, 2, …); set by [`Chain::append`].
    pub seq: i64,
    /// When the decision was made (RFC 3339 UTC, ms).
    pub at: String,
    /// Gateway that decided.
    pub gateway: String,
    /// Scanner that read the scan.
    pub scanner: String,
    /// The scan.
    pub scan_uuid: String,
    /// Its capture time (RFC 3339 UTC, ms).
    pub captured_at: String,
    /// Whether the wall clock was synchronised at capture.
    pub clock_synced: bool,
    /// With a facility store: the capture on facility time (RFC 3339 UTC,
    /// ms), as claimed and in the ledger; `captured_at` stays the gateway's
    /// own wall stamp. Absent in embedded mode and in records written
    /// before facility time (so their hashes are unchanged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facility_at: Option<String>,
    /// Facility time minus the wall stamp (ms), the offset that was used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_offset_ms: Option<i64>,
    /// The mapping's error bound (± ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_error_ms: Option<i64>,
    /// committed | suppressed | rejected | unresolved.
    pub decision: ScanState,
    /// Content key (absent for rejected scans).
    pub content_key: Option<String>,
    /// For suppressed scans: the committed twin.
    pub twin_uuid: Option<String>,
    /// Why: for a rejected scan the rejection, for an unresolved one the
    /// facility store's failure; for a commit or an echo only when it was
    /// decided in an unusual way (`outbox decide-locally` says so).
    pub reason: Option<String>,
    /// Length of the raw frame in bytes.
    pub raw_len: i64,
    /// Only on a conflict record (written by a reconciliation, beside the
    /// scan's decision, which stands): another gateway committed a twin of
    /// this committed scan while the facility store had lost data, so one
    /// pick may be in two ledgers. Absent on every other record (so records
    /// written before it existed hash the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict: Option<AuditConflict>,
    /// Only on a state reset record (`scangate state reset`), the first
    /// record of a new chain: the state whose database was lost. Its
    /// `scan_uuid` is the new state's identity, its decision `pending`
    /// (it decides no scan). Absent on every other record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_reset: Option<AuditStateReset>,
    /// Only on a commit record: the hash of the ledger entry it appended
    /// ([`crate::ledger::entry_hash`], of the entry as `ledger export`
    /// prints it), so the ledger is under the chain. Absent on records
    /// written before it existed (their entries are not covered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger_hash: Option<String>,
    /// Only on a checkpoint record (`scangate audit prune`): the records
    /// and ledger entries pruned from the database, and the archives that
    /// hold them. Its `scan_uuid` is the checkpoint's own UUID, its
    /// decision `pending` (it decides no scan). Absent on every other record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pruned: Option<AuditPruned>,
}

/// What a checkpoint record says was pruned ([`AuditRecord::pruned`]).
/// The live chain then starts at record `through_seq + 1`, whose
/// `prev_hash` is `through_hash`: `audit verify` accepts that start only
/// with a checkpoint record naming it, and with the archives checks the
/// pruned records too.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AuditPruned {
    /// The first record pruned (the first in the database before).
    pub first_seq: i64,
    /// The last record pruned.
    pub through_seq: i64,
    /// Its hash: the `prev_hash` of the first record kept.
    pub through_hash: String,
    /// Ledger entries pruned with them (those the pruned records committed).
    pub ledger_entries: i64,
    /// The archives holding them: their content SHA-256 (manifest `content_sha256`).
    pub archives: Vec<String>,
    /// `[records] keep_days` at the time.
    pub keep_days: u64,
}

/// What a state reset started over from ([`AuditRecord::state_reset`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AuditStateReset {
    /// The lost state's identity (`unidentified` if it had none).
    pub lost_state_id: String,
    /// Its last anchored chain head's position, if one was anchored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_head_seq: Option<i64>,
    /// Its last anchored chain head's hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_head_hash: Option<String>,
    /// What was in the database's place, moved aside (file names).
    pub moved_aside: Vec<String>,
}

/// The other side of a conflict ([`AuditRecord::conflict`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AuditConflict {
    /// The other gateway's committed scan.
    pub other_scan_uuid: String,
    /// The other gateway, when known (the re-publishing side learns only
    /// the twin's UUID; the other side reads both from the facility).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_gateway: Option<String>,
}

/// A record as stored, ready to emit after commit.
#[derive(Debug, Clone)]
pub struct Emitted {
    /// Chain position.
    pub seq: i64,
    /// The record's scanner, scan and decision, as fields of their own
    /// (`SCANNER=`, `SCAN_UUID=`, `DECISION=` in the journal).
    pub scanner: String,
    /// The record's scan.
    pub scan_uuid: String,
    /// The record's decision.
    pub decision: ScanState,
    /// Record hash.
    pub hash: String,
    /// Canonical JSON.
    pub record: String,
}

/// Appends records to the chain inside one transaction.
pub struct Chain<'t> {
    tx: &'t Connection,
    prev: String,
    next_seq: i64,
    emitted: Vec<Emitted>,
}

pub(crate) fn chain_hash(prev: &str, record: &str) -> String {
    let mut h = Sha256::new();
    h.update(prev.as_bytes());
    h.update(b"\n");
    h.update(record.as_bytes());
    hex::encode(h.finalize())
}

impl<'t> Chain<'t> {
    /// Start appending after the current head; use it inside a transaction.
    pub fn begin(tx: &'t Connection) -> rusqlite::Result<Chain<'t>> {
        let head: Option<(i64, String)> = tx
            .query_row(
                "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let (seq, prev) = head.unwrap_or((0, GENESIS.to_string()));
        Ok(Chain {
            tx,
            prev,
            next_seq: seq + 1,
            emitted: Vec::new(),
        })
    }

    /// Append one record (its `seq` is assigned here).
    pub fn append(&mut self, mut rec: AuditRecord) -> rusqlite::Result<()> {
        rec.seq = self.next_seq;
        let json = serde_json::to_string(&rec).expect("audit records always serialise");
        let hash = chain_hash(&self.prev, &json);
        self.tx
            .prepare_cached(
                "INSERT INTO audit (seq, scan_uuid, content_key, record, prev_hash, hash)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![
                rec.seq,
                rec.scan_uuid,
                rec.content_key,
                json,
                self.prev,
                hash
            ])?;
        self.emitted.push(Emitted {
            seq: rec.seq,
            scanner: rec.scanner,
            scan_uuid: rec.scan_uuid,
            decision: rec.decision,
            hash: hash.clone(),
            record: json,
        });
        self.prev = hash;
        self.next_seq += 1;
        Ok(())
    }

    /// Record the new head; returns the records to emit once committed.
    pub fn finish(self) -> rusqlite::Result<Vec<Emitted>> {
        if !self.emitted.is_empty() {
            crate::store::put_meta(
                self.tx,
                HEAD_KEY,
                &format!("{} {}", self.next_seq - 1, self.prev),
            )?;
        }
        Ok(self.emitted)
    }
}

/// Emit committed records through tracing (target
/// [`crate::logging::AUDIT_TARGET`], under its own journal identifier).
pub fn emit(records: &[Emitted]) {
    for r in records {
        tracing::info!(
            target: crate::logging::AUDIT_TARGET,
            seq = r.seq, scanner = %r.scanner, scan_uuid = %r.scan_uuid, decision = %r.decision,
            hash = %r.hash, record = %r.record,
            "audit"
        );
    }
}

/// The chain head as recorded (its record count and last hash; `None`
/// before the first record): cheap, one `meta` read, nothing verified.
pub fn recorded_head(store: &Store) -> Result<Option<(i64, String)>, StoreError> {
    Ok(store.meta(HEAD_KEY)?.and_then(|head| {
        let (seq, hash) = head.split_once(' ')?;
        Some((seq.parse().ok()?, hash.to_string()))
    }))
}

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

/// The first record still in the database and its `prev_hash` (the hash
/// of the last record pruned before it, or 64 zeros): `None` for an empty
/// chain.
pub fn first_live(store: &Store) -> Result<Option<(i64, String)>, StoreError> {
    store
        .conn
        .query_row(
            "SELECT seq, prev_hash FROM audit ORDER BY seq LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(|e| store.err_at(e))
}

/// Walk the whole chain and report the first broken record. A database
/// whose first records were pruned (`audit prune`) is walked from the first
/// record kept, which must be named by a checkpoint record in the chain
/// ([`AuditPruned`]); the pruned records are checked with their archives
/// ([`archive::verify_file`]).
pub fn verify(store: &Store) -> Result<Verification, StoreError> {
    let err = |e| store.err_at(e);
    // Where the live chain starts: record 1 after the genesis hash, or the
    // first record kept after a prune (checked below against its checkpoint).
    let start = first_live(store)?.filter(|(seq, _)| *seq > 1);
    let mut checkpoint_seen = false;
    let mut q = store
        .conn
        .prepare(
            "SELECT seq, scan_uuid, content_key, record, prev_hash, hash FROM audit ORDER BY seq",
        )
        .map_err(err)?;
    let mut rows = q.query([]).map_err(err)?;
    let (mut expected, mut prev) = match &start {
        Some((seq, prev_hash)) => (*seq, prev_hash.clone()),
        None => (1, GENESIS.to_string()),
    };
    while let Some(r) = rows.next().map_err(err)? {
        let seq: i64 = r.get(0).map_err(err)?;
        let uuid: String = r.get(1).map_err(err)?;
        let key: Option<String> = r.get(2).map_err(err)?;
        let record: String = r.get(3).map_err(err)?;
        let prev_hash: String = r.get(4).map_err(err)?;
        let hash: String = r.get(5).map_err(err)?;
        let broken = |problem: String| {
            Ok(Verification::Broken {
                seq: expected,
                problem,
            })
        };
        if seq != expected {
            return broken(format!(
                "record {expected} is missing (the next one is {seq})"
            ));
        }
        if prev_hash != prev {
            return broken(format!(
                "record {seq}: prev_hash does not match the hash of record {}",
                seq - 1
            ));
        }
        if chain_hash(&prev_hash, &record) != hash {
            return broken(format!(
                "record {seq}: content does not match its hash (altered)"
            ));
        }
        match serde_json::from_str::<AuditRecord>(&record) {
            Ok(rec) if rec.seq == seq && rec.scan_uuid == uuid && rec.content_key == key => {
                // The checkpoint that removed the records before `first`
                // (all of them, or, while a prune is interrupted, some).
                if let (Some(p), Some((first, first_prev))) = (&rec.pruned, &start) {
                    let before = first - 1;
                    checkpoint_seen |= (p.first_seq..p.through_seq).contains(&before)
                        || (before == p.through_seq && p.through_hash == *first_prev);
                }
            }
            Ok(_) => {
                return broken(format!(
                    "record {seq}: indexed columns do not match the hashed record (altered)"
                ));
            }
            Err(e) => return broken(format!("record {seq}: not a valid audit record: {e}")),
        }
        prev = hash;
        expected += 1;
    }
    let last = expected - 1;
    if let Some((first, _)) = start.filter(|_| !checkpoint_seen) {
        return Ok(Verification::Broken {
            seq: 1,
            problem: format!(
                "record 1 is missing (the next one is {first}), and no checkpoint record says records 1..={} were pruned into an archive",
                first - 1
            ),
        });
    }
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
        return Ok((head.seq == first - 1 && head.hash != first_prev).then(|| {
            format!(
                "record {} is not the one {by} saw (hash {}): the chain was rewritten from there or before",
                head.seq, head.hash
            )
        }));
    }
    let hash: Option<String> = store
        .conn
        .query_row("SELECT hash FROM audit WHERE seq = ?1", [head.seq], |r| {
            r.get(0)
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

/// A commit record that covers a ledger entry: canonical JSON has exactly
/// this key only where the field is present (quotes inside strings are
/// escaped).
const LEDGER_HASH_LIKE: &str = "%\"ledger_hash\":%";

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
    let err = |e| store.err_at(e);
    let recorded: i64 = store
        .conn
        .query_row(
            "SELECT count(*) FROM audit WHERE record LIKE ?1",
            [LEDGER_HASH_LIKE],
            |r| r.get(0),
        )
        .map_err(err)?;
    if recorded != covered {
        for rec in records_where(
            store,
            "SELECT seq, record FROM audit WHERE record LIKE ?1 ORDER BY seq",
            params![LEDGER_HASH_LIKE],
        )? {
            if !crate::ledger::has_entry(&store.conn, &rec.scan_uuid).map_err(err)? {
                return Ok(LedgerCheck::Broken {
                    entry: rec.seq,
                    problem: format!(
                        "the ledger entry of scan {}, committed by audit record {}, is missing from the ledger",
                        rec.scan_uuid, rec.seq
                    ),
                });
            }
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

/// What this gateway recorded about one content key ([`trail_for_key`]).
pub struct KeyTrail {
    /// Every audit record of every scan with that key, in chain order.
    pub records: Vec<AuditRecord>,
    /// Scans with that key this gateway read: its outbox rows, and the
    /// scans recorded whose rows were removed after the dedup horizon.
    pub transmissions: usize,
    /// Twins named by its echoes that are scans of this gateway (so their
    /// commit should be among `records`).
    pub local_twins: std::collections::HashSet<String>,
    /// Decided scans (UUID, state) whose decision has no readable record:
    /// the trail was altered (`audit verify` says where).
    pub unrecorded: Vec<(String, ScanState)>,
}

/// Every audit record about one content key: every scan this gateway read
/// with that key — committed, suppressed (whether its twin is this
/// gateway's commit or, with a facility store, another gateway's), or
/// waiting. The outbox is read whole once ([`outbox::scans_with_key`]:
/// 0.2–0.3 s for a million scans here, warm cache; more from a cold SD
/// card); everything else goes by index.
pub fn trail_for_key(store: &Store, content_key: &str) -> Result<KeyTrail, StoreError> {
    let err = |e| store.err_at(e);
    let scans = outbox::scans_with_key(&store.conn, content_key).map_err(err)?;
    // Once decided outbox rows were removed (after the dedup horizon), their
    // scans are found by their records, read whole: there is no index by
    // content key (its random inserts would cost every scan a page write, as
    // `ledger_key` did; a trace is rare).
    let mut records = if outbox::was_pruned(&store.conn).map_err(err)? {
        records_where(
            store,
            "SELECT seq, record FROM audit WHERE content_key = ?1 ORDER BY seq",
            params![content_key],
        )?
    } else {
        Vec::new()
    };
    let mut seen: std::collections::HashSet<i64> = records.iter().map(|r| r.seq).collect();
    for (uuid, _) in &scans {
        for r in records_for_scan(store, uuid)? {
            if seen.insert(r.seq) {
                records.push(r);
            }
        }
    }
    records.sort_by_key(|r| r.seq);
    let mut local_twins = std::collections::HashSet::new();
    for twin in records.iter().filter_map(|r| r.twin_uuid.as_deref()) {
        if !local_twins.contains(twin)
            && (outbox::has_scan(&store.conn, twin).map_err(err)?
                || crate::ledger::has_entry(&store.conn, twin).map_err(err)?)
        {
            local_twins.insert(twin.to_string());
        }
    }
    // Transmissions: the outbox rows, and the scans recorded whose rows
    // were removed.
    let read: std::collections::HashSet<&str> = scans
        .iter()
        .map(|(uuid, _)| uuid.as_str())
        .chain(
            records
                .iter()
                .filter(|r| r.conflict.is_none())
                .map(|r| r.scan_uuid.as_str()),
        )
        .collect();
    let transmissions = read.len();
    let recorded: std::collections::HashSet<(&str, ScanState)> = records
        .iter()
        .map(|r| (r.scan_uuid.as_str(), r.decision))
        .collect();
    let unrecorded = scans
        .iter()
        .filter(|(uuid, state)| {
            matches!(state, ScanState::Committed | ScanState::Suppressed)
                && !recorded.contains(&(uuid.as_str(), *state))
        })
        .cloned()
        .collect();
    Ok(KeyTrail {
        transmissions,
        records,
        local_twins,
        unrecorded,
    })
}

/// The audit records of one scan (normally exactly one).
pub fn records_for_scan(store: &Store, scan_uuid: &str) -> Result<Vec<AuditRecord>, StoreError> {
    records_where(
        store,
        "SELECT seq, record FROM audit WHERE scan_uuid = ?1 ORDER BY seq",
        params![scan_uuid],
    )
}

/// Run a `SELECT seq, record …` and parse the records. One that does not
/// parse is reported (it has been altered) and left out.
fn records_where(
    store: &Store,
    sql: &str,
    args: &[&dyn rusqlite::ToSql],
) -> Result<Vec<AuditRecord>, StoreError> {
    let err = |e| store.err_at(e);
    // Cached: a trace runs it once per scan of the label.
    let mut q = store.conn.prepare_cached(sql).map_err(err)?;
    let rows = q
        .query_map(args, |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
        .map_err(err)?;
    let mut out = Vec::new();
    for row in rows {
        let (seq, text) = row.map_err(err)?;
        match serde_json::from_str(&text) {
            Ok(rec) => out.push(rec),
            Err(e) => crate::events::AuditRecordUnreadable { seq, error: &e }.emit(),
        }
    }
    Ok(out)
}

/// Resolve a trace argument (scan UUID or content key) to a content key.
pub fn key_of(store: &Store, id: &str) -> Result<Option<String>, StoreError> {
    if id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(Some(id.to_ascii_lowercase()));
    }
    outbox::content_key_of(&store.conn, id).map_err(|e| store.err_at(e))
}

/// Human-readable trace of one content key: each committed scan and the
/// echoes suppressed against it, then the scans still waiting. The second
/// value is false if the trail is incomplete: an echo names one of this
/// gateway's scans whose commit has no readable record.
pub fn render_trace(content_key: &str, trail: &KeyTrail) -> (String, bool) {
    use std::fmt::Write;
    let records = &trail.records;
    let note = |r: &AuditRecord| {
        r.reason
            .as_deref()
            .map_or_else(String::new, |why| format!("  ({why})"))
    };
    let mut out = String::new();
    let _ = writeln!(out, "content key {content_key}");
    // (A conflict record stands beside its scan's commit record.)
    let committed: Vec<&AuditRecord> = records
        .iter()
        .filter(|r| r.decision == ScanState::Committed && r.conflict.is_none())
        .collect();
    let here: std::collections::HashSet<&str> =
        committed.iter().map(|c| c.scan_uuid.as_str()).collect();
    // Twins named by echoes but not committed in this trail: another
    // gateway's commit (facility store), or this gateway's whose record
    // is missing.
    let mut named: Vec<&str> = Vec::new();
    for r in records
        .iter()
        .filter(|r| r.decision == ScanState::Suppressed)
    {
        if let Some(twin) = r.twin_uuid.as_deref()
            && !here.contains(twin)
            && !named.contains(&twin)
        {
            named.push(twin);
        }
    }
    let entries = committed.len()
        + named.len()
        + trail
            .unrecorded
            .iter()
            .filter(|(uuid, state)| {
                *state == ScanState::Committed && !named.contains(&uuid.as_str())
            })
            .count();
    let _ = writeln!(
        out,
        "{} transmission(s), {entries} ledger entr{} ({} audit record{})",
        trail.transmissions,
        if entries == 1 { "y" } else { "ies" },
        records.len(),
        if records.len() == 1 { "" } else { "s" }
    );
    let echoes_of = |out: &mut String, twin: &str| {
        for e in records
            .iter()
            .filter(|r| r.decision == ScanState::Suppressed && r.twin_uuid.as_deref() == Some(twin))
        {
            let _ = writeln!(
                out,
                "    echo suppressed  {}  captured {}  audit #{}{}",
                e.scan_uuid,
                e.captured_at,
                e.seq,
                note(e)
            );
        }
    };
    for c in &committed {
        let _ = writeln!(
            out,
            "  committed  {}  captured {}  scanner {}  audit #{}{}",
            c.scan_uuid,
            c.captured_at,
            c.scanner,
            c.seq,
            note(c)
        );
        for x in records
            .iter()
            .filter(|r| r.scan_uuid == c.scan_uuid && r.conflict.is_some())
        {
            let other = x.conflict.as_ref().expect("filtered");
            let by = other
                .other_gateway
                .as_deref()
                .map_or_else(|| "another gateway".to_string(), |g| format!("gateway {g}"));
            let _ = writeln!(
                out,
                "    CONFLICT  {by} committed {} as a pick of this label too, while the facility store had lost data: one pick may be in two ledgers (the facility stream keeps one entry); check which is right  audit #{}",
                other.other_scan_uuid, x.seq
            );
        }
        echoes_of(&mut out, &c.scan_uuid);
    }
    let mut complete = trail.unrecorded.is_empty();
    for (uuid, state) in &trail.unrecorded {
        if *state == ScanState::Committed && named.contains(&uuid.as_str()) {
            continue; // said below, with the echoes that name it
        }
        let _ = writeln!(
            out,
            "  {state}  {uuid}  — this decision has NO readable audit record: run `scangate audit verify`"
        );
    }
    for twin in named {
        if trail.local_twins.contains(twin) {
            complete = false;
            let _ = writeln!(
                out,
                "  committed  {twin}  — a scan of this gateway whose commit has NO readable audit record: run `scangate audit verify`"
            );
        } else {
            let _ = writeln!(
                out,
                "  committed by another gateway of the facility  {twin}  (its ledger entry is in the facility stream)"
            );
        }
        echoes_of(&mut out, twin);
    }
    // Scans still waiting: their records are all `unresolved` (a scan
    // decided after an outage also has one, shown by the count above).
    let decided: std::collections::HashSet<&str> = records
        .iter()
        .filter(|r| r.decision != ScanState::Unresolved)
        .map(|r| r.scan_uuid.as_str())
        .collect();
    let mut waiting: Vec<&AuditRecord> = Vec::new();
    for r in records {
        if !decided.contains(r.scan_uuid.as_str())
            && !waiting.iter().any(|w| w.scan_uuid == r.scan_uuid)
        {
            waiting.push(r);
        }
    }
    for r in waiting {
        let _ = writeln!(
            out,
            "  {}  {}  captured {}  audit #{}{}",
            r.decision,
            r.scan_uuid,
            r.captured_at,
            r.seq,
            note(r)
        );
    }
    (out, complete)
}
