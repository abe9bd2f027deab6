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
//! This file holds the chain: [`Chain`] (append inside a decision's transaction), [`emit`] and
//! the recorded head. Checking the chain ([`verify()`], [`check_anchor`],
//! [`verify_ledger`]) is in `verify.rs`; reading one label's trail
//! ([`trail_for_key`], [`render_trace`]) in `trace.rs`; archives and
//! pruning in [`archive`]; `scangate state reset` in [`reset`].

use crate::model::ScanState;
use crate::store::packed::{Unpacked, packed};
use crate::store::{Store, StoreError};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, OptionalExtension, params};
use sha2::{Digest, Sha256};

pub mod archive;
mod record;
pub(crate) mod reset;
pub mod stored;
mod trace;
mod verify;

pub use record::{
    AMBIGUOUS_WHY, AuditAmbiguous, AuditConflict, AuditDeclared, AuditPruned, AuditRecord,
    AuditStateReset, AuditUnacknowledged, ScanFacts,
};
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
