//! Reconciliation: the facility store lost data (emptied, replaced, a
//! lagging replica promoted, an older backup restored), and this gateway
//! re-publishes its own commits of the retention horizon through the same
//! claim, idempotent by scan UUID, before it claims new scans
//! (docs/design.md, "Reconciliation").
//!
//! Every claim carries **markers** ([`markers`]): this gateway's latest
//! commit recorded in its own ledger, and each claimer lane's latest
//! commit; the claim script refuses with nothing changed when a marker's
//! decision is missing ([`FacilityError::Lost`]). Replication and snapshots
//! keep a prefix of the history, so a store that has a lane's newest commit
//! has all the lane's earlier ones: a lane sends its rounds one after
//! another and records them in that order. The two lanes' rounds are not
//! recorded in the order the store ran them (each lane writes its verdicts
//! when its answer comes), so the newest ledger entry alone could be older
//! in the store's history than another lane's commit that a lost suffix
//! took: hence one marker per lane. The live lane also probes the markers
//! every minute, so an idle gateway notices too. Detected, the lane holds the claimer's
//! reconciliation lock (the other lane's sends wait on it), re-publishes
//! ([`reconcile`]), then claims again. A re-published scan the facility
//! suppresses as an echo of another scan is a **conflict**: another
//! gateway committed the same pick while the store was without it. It is
//! audited here (a record beside the commit, naming both scans), shown by
//! `outbox status`, and published on the facility's conflicts stream,
//! which every gateway reads ([`read_notices`]) to audit it on its side.

use super::claims::{LaneKind, claim_on};
use crate::audit;
use crate::checks::received::Receipt;
use crate::decided::DecisionWriter;
use crate::events::Event as _;
use crate::facility::{Claim, Facility, FacilityError, Outcome};
use crate::model::{ConflictRecord, Findings, Reconciliation};
use crate::outbox::{self, ScanRow};
use crate::store::{Store, StoreError};
use std::time::Instant;

/// A commit captured longer ago than the retention less this is no marker:
/// its decision key (set when it was claimed, for the retention) may have
/// expired legitimately.
const MARKER_MARGIN_MS: i64 = 10 * 60 * 1000;

/// The log target of this module's lines (as when it sat under `daemon`:
/// operators filter on it).
const RECONCILE_TARGET: &str = "scangate::daemon::claimer::reconcile";

/// Commits re-published per claim round (pipelined calls of 128).
pub const REPUBLISH_ROUND: usize = 512;

/// Conflict notices read per page of the facility's conflicts stream.
const NOTICES_PAGE: usize = 100;

/// `meta` key of the last conflicts-stream entry this gateway has read.
const NOTICES_CURSOR: &str = "facility_conflicts_cursor";

/// Why a reconciliation or a read of the conflicts stream failed (the
/// reason a round is audited unresolved with).
#[derive(Debug, thiserror::Error)]
pub(super) enum Failed {
    /// The facility store.
    #[error("{0}")]
    Facility(#[from] FacilityError),
    /// The local database.
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// `meta` key of a reconciliation begun and not finished: the lost marker.
const PENDING: &str = "facility_reconciliation_pending";

/// The lost marker of a reconciliation begun and not finished (cut short
/// by a failure after the marker was re-published, before its conflicts
/// were all recorded and published): the live lane's probe finishes it.
pub(super) fn pending(store: &Store) -> Option<String> {
    store.meta(PENDING).ok().flatten().filter(|m| !m.is_empty())
}

/// `meta` key of `lane`'s latest commit (`<scan_uuid> <facility ms>`).
fn lane_marker_key(lane: LaneKind) -> &'static str {
    match lane {
        LaneKind::Live => "facility_marker_live",
        LaneKind::Replay => "facility_marker_replay",
    }
}

/// Note in `tx`, the transaction that records a round of `lane`, that
/// `scan_uuid` is the lane's latest commit, recorded at `facility_ms`
/// (facility time: its decision key, set when it was claimed just before,
/// expires a retention after about then).
pub(super) fn note_commit(
    tx: &rusqlite::Connection,
    lane: LaneKind,
    scan_uuid: &str,
    facility_ms: i64,
) -> rusqlite::Result<()> {
    crate::store::put_meta(
        tx,
        lane_marker_key(lane),
        &format!("{scan_uuid} {facility_ms}"),
    )
}

/// This gateway's markers, the commits whose decisions the facility store
/// must have (docs/design.md, "Reconciliation"): its latest commit recorded
/// in its own ledger, captured within the retention (less
/// `MARKER_MARGIN_MS`) before `now_ms` — facility time, as the ledger's
/// capture times and the decision keys' expiry are — and each lane's latest
/// commit (`note_commit`) recorded within that horizon. Empty (no check
/// this round) when there is none, or the database cannot say.
pub fn markers(store: &Store, now_ms: i64, retention_ms: i64) -> Vec<String> {
    let since = now_ms - retention_ms + MARKER_MARGIN_MS;
    let mut out = Vec::with_capacity(3);
    match crate::ledger::latest_since(&store.conn, since) {
        Ok(latest) => out.extend(latest),
        Err(e) => {
            tracing::debug!(target: RECONCILE_TARGET, "reading the latest commit for the claim's marker: {e}")
        }
    }
    for lane in [LaneKind::Live, LaneKind::Replay] {
        let noted = match store.meta(lane_marker_key(lane)) {
            Ok(noted) => noted,
            Err(e) => {
                tracing::debug!(
                    target: RECONCILE_TARGET,
                    "reading the {lane:?} lane's latest commit for the claim's marker: {e}"
                );
                continue;
            }
        };
        let Some((uuid, at)) = noted.as_deref().and_then(|v| v.split_once(' ')) else {
            continue;
        };
        if at.parse::<i64>().is_ok_and(|at| at >= since) && !out.iter().any(|m| m == uuid) {
            out.push(uuid.to_string());
        }
    }
    out
}

/// Re-publish this gateway's commits of the retention horizon before
/// `now_ms` (facility time), in ledger order, the `lost` marker last (so a
/// reconciliation cut short before it is detected again and run again:
/// every step is idempotent); one cut short after it is finished by the
/// probe, from the durable [`pending`] mark set here and cleared once its
/// conflicts are recorded and published. `None` if the marker is there
/// after all and nothing is pending (the other lane reconciled first).
pub(super) fn reconcile(
    f: &mut Facility,
    store: &mut Store,
    gate: &super::FacilityGate,
    now_ms: i64,
    retention_ms: i64,
    lost: &str,
    progress: &crate::notify::Progress,
) -> Result<Option<Reconciliation>, Failed> {
    let gateway = gate.gateway();
    if pending(store).is_none() {
        if f.has_decision(lost)? {
            return Ok(None);
        }
        store.set_meta(PENDING, lost)?;
    }
    let started = Instant::now();
    let at_ms = chrono::Utc::now().timestamp_millis();
    let err = |e| store.err_at(e);
    let mut scans = crate::ledger::scans_since(&store.conn, now_ms - retention_ms).map_err(err)?;
    // The lost marker last; also one captured before the horizon (a lane's
    // marker is new by when it was claimed: a late replay of an old scan),
    // or every claim would be refused for it again.
    let marker = match scans.iter().position(|s| s.0 == lost) {
        Some(at) => Some(scans.remove(at)),
        None => crate::ledger::scan_of(&store.conn, lost).map_err(err)?,
    };
    scans.extend(marker);
    let mut republished = 0;
    let mut conflicts: Vec<(ScanRow, String)> = Vec::new();
    for chunk in scans.chunks(REPUBLISH_ROUND) {
        // (Each round is progress: a horizon of commits takes many, and the
        // watchdog must not take the whole reconciliation for a wedge.)
        progress.advance();
        let mut rows = Vec::with_capacity(chunk.len());
        for (uuid, captured_ms, synced) in chunk {
            // An outbox row the sweeper removed (it goes by the wall clock,
            // which may have been stepped on): the ledger entry has every
            // field the claim needs.
            // (The entry also holds what the checks found at the commit:
            // re-published as it was, not found again.)
            let entry = crate::ledger::entry_for_scan(&store.conn, uuid).map_err(err)?;
            let findings = entry.as_ref().map(|e| Findings {
                dea_schedule: e.dea_schedule.clone(),
                alerts: e.alerts.clone(),
            });
            let row = match outbox::row_of(&store.conn, uuid).map_err(err)? {
                Some(row) => Some(row),
                None => {
                    crate::events::Reconcile::NotInOutbox { scan: uuid }.emit();
                    entry.map(|e| row_of_entry(e, *captured_ms))
                }
            };
            rows.extend(row.map(|row| (row, *captured_ms, *synced, findings)));
        }
        // Claimed again as committed: on the time its ledger entry has
        // (facility time), not its outbox row's wall stamp (which a
        // conflict's audit record keeps).
        let claims: Vec<Claim> = rows
            .iter()
            .map(|(row, captured_ms, synced, findings)| {
                claim_on(
                    row,
                    gateway,
                    row.window.map(|_| gate.local().window_of(row)),
                    (*captured_ms, *synced),
                    findings.as_ref(),
                )
            })
            .collect();
        let outcomes = f.claim_batch(&claims)?;
        republished += claims.len();
        for ((row, ..), outcome) in rows.into_iter().zip(outcomes) {
            if let Outcome::Suppressed { twin } = outcome
                && twin != row.uuid
            {
                conflicts.push((row, twin));
            }
        }
    }
    republish_receipts(store, gate, f, now_ms, progress)?;
    let found = conflicts.len();
    let noted: Vec<(ScanRow, String, Option<String>)> = conflicts
        .iter()
        .map(|(row, twin)| (row.clone(), twin.clone(), None))
        .collect();
    record_conflicts(store, gateway, noted, None)?;
    for (row, twin) in &conflicts {
        f.publish_conflict(gateway, &row.uuid, twin)?;
    }
    let took_ms = started.elapsed().as_millis() as i64;
    let done = Reconciliation {
        at_ms,
        lost_marker: lost.to_string(),
        republished,
        conflicts: found,
        took_ms,
    };
    super::records::set_reconciliation(store, &done)?;
    store.set_meta(PENDING, "")?;
    Ok(Some(done))
}

/// Re-publish this gateway's receipts of serialised items within `[checks]
/// serial_retention_days` (its committed `receive` reads, from its
/// ledger), so a package it received before the loss is still known to
/// the facility's suspect check; each kept until its own retention ends.
/// A receipt another gateway made meanwhile stays the first.
fn republish_receipts(
    store: &Store,
    gate: &super::FacilityGate,
    f: &mut Facility,
    now_ms: i64,
    progress: &crate::notify::Progress,
) -> Result<(), Failed> {
    let Some(keep) = gate.local().checks().map(|c| c.serial_retention()) else {
        return Ok(());
    };
    let since = now_ms - keep.as_millis() as i64;
    let kept = crate::ledger::receipts_since(&store.conn, since).map_err(|e| store.err_at(e))?;
    for chunk in kept.chunks(REPUBLISH_ROUND) {
        progress.advance();
        let receipts: Vec<Receipt<'_>> = chunk
            .iter()
            .map(|r| Receipt {
                gtin: &r.gtin,
                serial: &r.serial,
                scan_uuid: &r.scan_uuid,
                at_ms: r.captured_ms,
                scanner: &r.scanner,
            })
            .collect();
        f.receive_serials(gate.gateway(), &receipts, keep)?;
    }
    Ok(())
}

/// Committed scan `e` (captured at `captured_ms`) as an outbox row, for a
/// scan whose row is gone: what the claim and a conflict's audit record
/// need (its raw frame's length is not kept there: 0).
fn row_of_entry(e: crate::ledger::LedgerEntry, captured_ms: i64) -> ScanRow {
    ScanRow {
        seq: 0,
        state: crate::model::ScanState::Committed,
        uuid: e.scan_uuid,
        scanner: e.scanner,
        scan_type: e.scan_type,
        quantity: e.quantity,
        time: crate::capture::CaptureTime {
            utc_ms: captured_ms,
            boot_ns: 0,
            boot_id: String::new(),
            synced: e.clock_synced,
        },
        raw_len: 0,
        symbology: Some(e.symbology),
        gtin: e.gtin,
        ndc10: e.ndc10,
        lot: e.lot,
        serial: e.serial,
        expiry: e.expiry,
        content_key: Some(e.content_key),
        reject_reason: None,
        window: None,
        unserialised: None,
        resend: false,
        declared: None,
        control: None,
    }
}

/// Read the facility's conflicts stream past this gateway's cursor and
/// audit each conflict another gateway's reconciliation found with one of
/// this gateway's commits. Returns how many were new here.
pub(super) fn read_notices(
    f: &mut Facility,
    store: &mut Store,
    gateway: &str,
) -> Result<usize, Failed> {
    let mut noted = 0;
    loop {
        let cursor = store.meta(NOTICES_CURSOR)?;
        let page = f.conflicts_after(cursor.as_deref(), NOTICES_PAGE)?;
        let Some(last) = page.last().map(|n| n.id.clone()) else {
            return Ok(noted);
        };
        let mut mine = Vec::new();
        for n in page.into_iter().filter(|n| n.gateway != gateway) {
            let err = |e| store.err_at(e);
            if !crate::ledger::has_entry(&store.conn, &n.twin_uuid).map_err(err)? {
                continue;
            }
            if let Some(row) = outbox::row_of(&store.conn, &n.twin_uuid).map_err(err)? {
                mine.push((row, n.scan_uuid, Some(n.gateway)));
            }
        }
        noted += record_conflicts(store, gateway, mine, Some(&last))?;
    }
}

/// Audit each conflict (this gateway's committed `row`, the other scan, the
/// other gateway if known) not audited yet, list it for `outbox status`
/// and, with `cursor`, move the conflicts stream's cursor: one
/// transaction. Returns how many were new.
fn record_conflicts(
    store: &mut Store,
    gateway: &str,
    found: Vec<(ScanRow, String, Option<String>)>,
    cursor: Option<&str>,
) -> Result<usize, Failed> {
    if found.is_empty() && cursor.is_none() {
        return Ok(0);
    }
    let w = store.write()?;
    let mut writer = DecisionWriter::begin(&w.tx, gateway).map_err(|e| w.err(e))?;
    let now_ms = writer.now_ms();
    let mut listed = Vec::new();
    for (row, other, other_gateway) in found {
        let known =
            crate::audit::has_conflict_record(&w.tx, &row.uuid, &other).map_err(|e| w.err(e))?;
        if known {
            continue;
        }
        let by = other_gateway
            .as_deref()
            .map_or_else(|| "another gateway".to_string(), |g| format!("gateway {g}"));
        crate::events::Reconcile::Conflict {
            scan: &row.uuid,
            other_scan: &other,
            other_gateway: other_gateway.as_deref(),
            by: &by,
        }
        .emit();
        writer
            .conflict(&row, &other, other_gateway.as_deref(), &by)
            .map_err(|e| w.err(e))?;
        listed.push(ConflictRecord {
            scan_uuid: row.uuid,
            other_scan_uuid: other,
            other_gateway,
            at_ms: now_ms,
        });
    }
    if !listed.is_empty() {
        super::records::add_conflicts(&w.tx, &listed).map_err(|e| w.err(e))?;
    }
    if let Some(c) = cursor {
        crate::store::put_meta(&w.tx, NOTICES_CURSOR, c).map_err(|e| w.err(e))?;
    }
    let emitted = writer.finish().map_err(|e| w.err(e))?;
    w.commit()?;
    audit::emit(&emitted);
    Ok(listed.len())
}
