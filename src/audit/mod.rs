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
//!
//! This file holds the records and the chain: [`AuditRecord`] and its
//! parts, [`Chain`] (append inside a decision's transaction), [`emit`] and
//! the recorded head. Checking the chain ([`verify()`], [`check_anchor`],
//! [`verify_ledger`]) is in `verify.rs`; reading one label's trail
//! ([`trail_for_key`], [`render_trace`]) in `trace.rs`; archives and
//! pruning in [`archive`]; `scangate state reset` in [`reset`].

use crate::model::ScanState;
use crate::store::packed::{Unpacked, packed};
use crate::store::{Store, StoreError};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub mod archive;
pub mod reset;
pub mod stored;
mod trace;
mod verify;

pub use trace::{
    KeyTrail, has_conflict_record, key_of, records_for_scan, render_trace, trail_for_key,
};
pub use verify::{LedgerCheck, Verification, check_anchor, first_live, verify, verify_ledger};

pub(crate) const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// SQL: a row of `audit`'s `prev_hash` as the chain has it: the column,
/// or where it is NULL the hash of the row before (64 zeros for record 1).
pub(crate) const PREV_HASH: &str = "coalesce(prev_hash,
    (SELECT p.hash FROM audit p WHERE p.seq = audit.seq - 1),
    CASE WHEN seq = 1 THEN zeroblob(32) END)";
use crate::store::identity::AUDIT_HEAD_KEY as HEAD_KEY;

/// The log target audit records are emitted under ([`emit`]); the log
/// puts them under a journal identifier of their own.
pub const AUDIT_TARGET: &str = "scangate::audit";

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
    /// Only on an echo of a label without a serial (not a resend): the
    /// suppression may have under-counted, and why. Absent on every other
    /// record (so records written before it existed hash the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ambiguous: Option<AuditAmbiguous>,
    /// Only on a scan the operator declared with a control label (REPEAT,
    /// QUANTITY N), and on the control read itself: what was declared and
    /// by which read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared: Option<AuditDeclared>,
}

/// Why an echo is ambiguous ([`AuditRecord::ambiguous`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AuditAmbiguous {
    /// Always the same words: the label carries no serial, so another
    /// identical item, a re-scan and a double-fire read alike.
    pub why: String,
    /// The scanner's policy for such labels (`window`, `double-fire`, `ask`).
    pub policy: String,
    /// The echo window it was judged by (ms).
    pub window_ms: i64,
}

/// The words of every [`AuditAmbiguous::why`].
pub const AMBIGUOUS_WHY: &str = "no serial on the label, and a commit of the same content inside the echo window: another identical item, a re-scan and a double-fire read alike";

/// What an operator declared ([`AuditRecord::declared`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AuditDeclared {
    /// `repeat` or `quantity N`.
    pub control: String,
    /// The control label's read (its scan UUID).
    pub by: String,
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
    /// Entries among them that a ledger consumer had not acknowledged
    /// (pruned because they were past `keep_days` + `consumer_hold_days`),
    /// per consumer. Absent when there were none (so checkpoint records
    /// written before it existed hash the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unacknowledged: Option<Vec<AuditUnacknowledged>>,
}

/// Ledger entries a prune removed although a consumer had not
/// acknowledged them ([`AuditPruned::unacknowledged`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AuditUnacknowledged {
    /// The consumer (`ledger consumers list`).
    pub consumer: String,
    /// How many of its entries.
    pub entries: i64,
    /// The first of them (ledger position).
    pub first_seq: i64,
    /// The last of them.
    pub through_seq: i64,
    /// Their age limit: `[records] keep_days` + `consumer_hold_days`.
    pub held_days: u64,
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
    /// The record being stored, packed ([`stored::pack_decision`]).
    packed: Vec<u8>,
    /// The INSERT, prepared once per chain (a decision's transaction),
    /// not looked up in the statement cache per record.
    insert: Option<rusqlite::CachedStatement<'t>>,
}

pub(crate) fn chain_hash(prev: &str, record: &str) -> String {
    let mut h = Sha256::new();
    h.update(prev.as_bytes());
    h.update(b"\n");
    h.update(record.as_bytes());
    crate::capture::hex32(&h.finalize().into())
}

impl<'t> Chain<'t> {
    /// Start appending after the current head; use it inside a transaction.
    pub fn begin(tx: &'t Connection) -> rusqlite::Result<Chain<'t>> {
        let head: Option<(i64, String)> = tx
            .query_row(
                "SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get::<_, Unpacked>(1)?.0)),
            )
            .optional()?;
        let (seq, prev) = head.unwrap_or((0, GENESIS.to_string()));
        Ok(Chain {
            tx,
            prev,
            next_seq: seq + 1,
            emitted: Vec::new(),
            packed: Vec::new(),
            insert: None,
        })
    }

    /// Append one record (its `seq` is assigned here). It is stored
    /// packed if it is a decision ([`stored::pack_decision`]), else as
    /// its JSON; its `prev_hash` is left NULL,
    /// "the hash of the row before", which it is.
    pub fn append(&mut self, mut rec: AuditRecord) -> rusqlite::Result<()> {
        rec.seq = self.next_seq;
        // A decision is packed from its fields and hashed as the JSON its
        // packed bytes unpack to: what `audit verify` will hash, by
        // construction. Debug builds hold that JSON to the serde form.
        let is_packed = stored::pack_decision(&rec, &mut self.packed);
        let json = if is_packed {
            let json = stored::unpack_record(&self.packed).expect("a record packed here unpacks");
            debug_assert_eq!(json, serde_json::to_string(&rec).unwrap());
            json
        } else {
            serde_json::to_string(&rec).expect("audit records always serialise")
        };
        let hash = chain_hash(&self.prev, &json);
        let record = if is_packed {
            ValueRef::Blob(&self.packed)
        } else {
            ValueRef::Text(json.as_bytes())
        };
        let insert = crate::store::held(
            &mut self.insert,
            self.tx,
            "INSERT INTO audit (seq, scan_uuid, record, hash) VALUES (?1, ?2, ?3, ?4)",
        )?;
        insert.execute(params![
            rec.seq,
            packed(&rec.scan_uuid),
            ToSqlOutput::Borrowed(record),
            packed(&hash)
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
/// [`AUDIT_TARGET`], under its own journal identifier).
pub fn emit(records: &[Emitted]) {
    for r in records {
        tracing::info!(
            target: AUDIT_TARGET,
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
