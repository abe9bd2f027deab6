//! What a decision writes, in the transaction that makes it: the scan's
//! outbox row (its state, twin, when it was decided), a commit's ledger
//! entry, and its audit record — and the later records of a decided scan
//! (a control read that lapsed unused, a conflict a reconciliation found).
//! The one writer of these: the gate's verdicts (embedded and claimed),
//! lapsed controls and reconciliation all write through a [`DecisionWriter`], so
//! what a decision records is said, and changed, here.
//!
//! The judging is the caller's ([`crate::gate`], [`crate::claimer`]): a
//! [`DecisionWriter`] is told the verdict and what the record must say of it, and
//! writes; it decides nothing.

use crate::audit::{
    AuditAmbiguous, AuditConflict, AuditDeclared, AuditRecord, Chain, Emitted, ScanFacts,
};
use crate::capture::clock::rfc3339_ms;
use crate::capture::key_bytes;
use crate::controls::ACKNOWLEDGE;
use crate::model::{ClockUsed, Findings, ScanState, Verdict};
use crate::outbox::{self, ScanRow};
use rusqlite::Connection;

/// What one deciding transaction writes through, each prepared once for
/// it: the audit chain, the outbox rows and the ledger entries (a
/// statement looked up in rusqlite's cache per scan cost ~3 % of the
/// embedded gateway's CPU).
pub struct DecisionWriter<'t> {
    tx: &'t Connection,
    chain: Chain<'t>,
    scans: outbox::Rows<'t>,
    ledger: crate::ledger::Appender<'t>,
    alerts: crate::checks::open::Raiser<'t>,
    receipts: crate::checks::received::Keeper<'t>,
    /// This gateway's id (the ledger's and the records' `gateway`).
    gateway: String,
    /// When the transaction's decisions were made (Unix ms).
    now_ms: i64,
}

/// How a decided scan's outbox row is written.
#[derive(Clone, Copy)]
pub enum RowWrite<'a> {
    /// The row is in the outbox: set its verdict.
    Update,
    /// A fresh scan decided before it was written: insert its row, with
    /// its frame, already decided.
    Insert {
        /// The frame as read.
        raw: &'a [u8],
        /// Its outbox position: the batch keeps the order it arrived in,
        /// though it is decided in capture order.
        seq: i64,
    },
}

/// A verdict on one scan, as the judge hands it to [`DecisionWriter::decision`].
pub struct DecidedScan<'a> {
    /// The scan's outbox row (`time` on facility time when `clock` says
    /// it was put there).
    pub row: ScanRow,
    /// The verdict.
    pub verdict: &'a Verdict,
    /// How its row is written.
    pub write: RowWrite<'a>,
    /// An ambiguous echo: why, and by which rule.
    pub ambiguous: Option<AuditAmbiguous>,
    /// How a facility claim's capture was put on facility time (the
    /// record keeps the wall stamp as well).
    pub clock: Option<&'a ClockUsed>,
    /// What else the record's reason must say of the decision, when the
    /// verdict has no reason of its own.
    pub notes: Vec<String>,
    /// What the checks at the counter found about the item (its DEA
    /// schedule, its alerts): kept in a commit's ledger entry and in the
    /// record.
    pub findings: Option<&'a Findings>,
}

/// What [`DecisionWriter::decision`] wrote of a scan.
pub struct WrittenScan {
    /// The scan's row (its `seq` the outbox's, once inserted).
    pub row: ScanRow,
    /// A commit's content key, as the ledger keeps it.
    pub committed_key: Option<[u8; 32]>,
    /// An ACKNOWLEDGE read: how many open alerts of its scanner it closed.
    pub acknowledged: Option<usize>,
}

impl<'t> DecisionWriter<'t> {
    /// Write decisions of `gateway` in `tx`, made now.
    pub fn begin(tx: &'t Connection, gateway: &str) -> rusqlite::Result<DecisionWriter<'t>> {
        Ok(DecisionWriter {
            tx,
            chain: Chain::begin(tx)?,
            scans: outbox::Rows::new(tx),
            ledger: crate::ledger::Appender::new(tx),
            alerts: crate::checks::open::Raiser::new(tx),
            receipts: crate::checks::received::Keeper::new(tx),
            gateway: gateway.to_string(),
            now_ms: chrono::Utc::now().timestamp_millis(),
        })
    }

    /// The receipts of serialised items kept in this transaction
    /// (`checks::received`; with the embedded store, the gate keeps a
    /// `receive` commit's before its decision is written).
    pub fn receipts(&mut self) -> &mut crate::checks::received::Keeper<'t> {
        &mut self.receipts
    }

    /// Write a verdict: the row's state, a commit's ledger entry, one
    /// audit record. `None` when an inserted scan was in the outbox
    /// already (it was decided then: nothing is written).
    pub fn decision(&mut self, d: DecidedScan<'_>) -> rusqlite::Result<Option<WrittenScan>> {
        let DecidedScan {
            mut row,
            verdict,
            write,
            ambiguous,
            clock,
            notes,
            findings,
        } = d;
        let (twin, reason) = match verdict {
            Verdict::Suppressed { twin } => (Some(twin.clone()), None),
            Verdict::Rejected { reason } | Verdict::Unresolved { reason } => {
                (None, Some(reason.clone()))
            }
            Verdict::Control { control } if control == ACKNOWLEDGE => (None, None),
            Verdict::Control { control } => (
                None,
                Some(format!(
                    "a control label: declares {control} for the next read on this scanner"
                )),
            ),
            _ => (None, None),
        };
        let set = outbox::SetVerdict {
            state: verdict.state(),
            twin: twin.as_deref(),
            ambiguous: ambiguous.is_some(),
            decided_ms: verdict.is_final().then_some(self.now_ms),
        };
        match write {
            RowWrite::Update => self.scans.set_verdict(row.seq, set)?,
            RowWrite::Insert { raw, seq } => {
                match self.scans.insert(raw, &row, Some(seq), Some(set))? {
                    Some(seq) => row.seq = seq,
                    None => return Ok(None),
                }
            }
        }
        // An alert staff are to acknowledge (once per read: a read that
        // waited was raised then).
        if let Some(kind) = findings.and_then(Findings::told)
            && matches!(verdict, Verdict::Committed | Verdict::Unresolved { .. })
        {
            self.alerts
                .raise(&row.uuid, &row.scanner, kind, self.now_ms)?;
        }
        // An ACKNOWLEDGE read closes its scanner's open alerts.
        let mut acknowledged = None;
        let mut reason = reason;
        if matches!(verdict, Verdict::Control { control } if control == ACKNOWLEDGE) {
            let (said, closed) = self.acknowledge(&row)?;
            reason = Some(said);
            acknowledged = Some(closed);
        }
        let mut ledger_hash = None;
        let mut committed_key = None;
        if *verdict == Verdict::Committed {
            let key = key_bytes(row.content_key.as_deref().unwrap_or_default());
            ledger_hash = Some(self.ledger.append(&row, &key, &self.gateway, findings)?);
            committed_key = Some(key);
        }
        let reason = reason.or_else(|| (!notes.is_empty()).then(|| notes.join("; ")));
        let declared = match (&row.declared, &row.control) {
            (Some((control, by)), _) => Some((control, by)),
            (None, Some(control)) => Some((control, &row.uuid)),
            (None, None) => None,
        }
        .map(|(control, by)| AuditDeclared {
            control: control.clone(),
            by: by.clone(),
        });
        // (The wall stamp as captured, also when the claim put it on
        // facility time.)
        let facts = ScanFacts {
            captured_ms: clock.map_or(row.time.utc_ms, |c| c.wall_ms),
            clock_synced: clock.map_or(row.time.synced, |c| c.wall_synced),
            ..ScanFacts::of(&row)
        };
        let mapped = clock.and_then(|c| c.mapped);
        self.chain.append(AuditRecord {
            facility_at: mapped.map(|_| rfc3339_ms(row.time.utc_ms)),
            clock_offset_ms: mapped.map(|(offset, _)| offset),
            clock_error_ms: mapped.map(|(_, error)| error),
            content_key: row.content_key.clone(),
            twin_uuid: twin,
            reason,
            ledger_hash,
            ambiguous,
            declared,
            dea_schedule: findings.and_then(|f| f.dea_schedule.clone()),
            alerts: findings
                .filter(|f| !f.alerts.is_empty())
                .map(|f| f.alerts.clone()),
            acknowledged: acknowledged.clone(),
            ..AuditRecord::decision(self.now_ms, &self.gateway, facts, verdict.state())
        })?;
        Ok(Some(WrittenScan {
            row,
            committed_key,
            acknowledged: acknowledged.map(|a| a.len()),
        }))
    }

    /// ACKNOWLEDGE read `row`: its scanner's open alerts closed and the
    /// control read ended. What its record's reason says, and the alerted
    /// reads it closed (oldest first).
    fn acknowledge(&mut self, row: &ScanRow) -> rusqlite::Result<(String, Vec<String>)> {
        let closed = crate::checks::open::acknowledge(self.tx, &row.scanner)?;
        outbox::end_control(self.tx, &row.uuid, "acknowledged")?;
        if closed.is_empty() {
            let said = "a control label: staff acknowledge this scanner's alerts; none was open";
            return Ok((said.into(), Vec::new()));
        }
        // (Counted by kind: the record's `acknowledged` names each read.)
        let mut kinds: Vec<(&str, usize)> = Vec::new();
        for a in &closed {
            match kinds.iter_mut().find(|(k, _)| *k == a.kind) {
                Some((_, n)) => *n += 1,
                None => kinds.push((&a.kind, 1)),
            }
        }
        let said = format!(
            "a control label: staff acknowledge this scanner's {} open alert(s): {}",
            closed.len(),
            kinds
                .iter()
                .map(|(k, n)| format!("{n} {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        Ok((said, closed.into_iter().map(|a| a.scan_uuid).collect()))
    }

    /// A control read that no read followed: its row marked lapsed and a
    /// second record of it, saying `why` it declared nothing. Its
    /// scanner's name; `None` if it was not a control read still open.
    pub fn lapsed_control(&mut self, uuid: &str, why: &str) -> rusqlite::Result<Option<String>> {
        let Some(row) = outbox::lapse_control(self.tx, uuid)? else {
            return Ok(None);
        };
        let what = row.control.clone().unwrap_or_default();
        let facts = ScanFacts::of(&row);
        self.chain.append(AuditRecord {
            reason: Some(format!("lapsed: {why}; it declared nothing")),
            declared: Some(AuditDeclared {
                control: what,
                by: row.uuid.clone(),
            }),
            ..AuditRecord::decision(self.now_ms, &self.gateway, facts, ScanState::Control)
        })?;
        Ok(Some(row.scanner))
    }

    /// A conflict a reconciliation found with this gateway's commit `row`:
    /// `by` (another gateway, named as `other_gateway` when known) also
    /// committed `other` as a pick of its label.
    pub fn conflict(
        &mut self,
        row: &ScanRow,
        other: &str,
        other_gateway: Option<&str>,
        by: &str,
    ) -> rusqlite::Result<()> {
        let facts = ScanFacts::of(row);
        self.chain.append(AuditRecord {
            content_key: row.content_key.clone(),
            reason: Some(format!(
                "conflict found by a reconciliation: {by} committed {other} as a pick of this label too while the facility store had lost data"
            )),
            conflict: Some(AuditConflict {
                other_scan_uuid: other.to_string(),
                other_gateway: other_gateway.map(str::to_string),
            }),
            ..AuditRecord::decision(self.now_ms, &self.gateway, facts, ScanState::Committed)
        })
    }

    /// When this transaction's decisions were made (Unix ms).
    pub fn now_ms(&self) -> i64 {
        self.now_ms
    }

    /// The audit records written, to emit once the transaction commits.
    pub fn finish(self) -> rusqlite::Result<Vec<Emitted>> {
        self.chain.finish()
    }
}
