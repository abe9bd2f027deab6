//! Deciding with the embedded store (no `[redis]`): the gate decides a
//! batch as the outbox writer writes it, in the **same** transaction, so a
//! scan and its decision become durable together with one fsync, before
//! the scanner's ACK (decided before written: each row is inserted once,
//! with its verdict; [`Gate::write_and_decide`]). Also used by `outbox decide-locally`, the benchmark and
//! tests: the one way to run the embedded pipeline synchronously.

use crate::capture::Scan;
use crate::gate::{DECIDE_BATCH, Gate, decision_of};
use crate::model::{Decision, Verdict};
use crate::store::{Store, StoreError};

/// Make `scans` durable and decide them in one transaction (one fsync).
/// If deciding fails, the scans are made durable alone, as `pending`, and
/// decided later ([`decide_pending`]) — a fault in the gate never costs a
/// scan its durability. Returns, per scan, whether it was new to the
/// outbox, and the decisions made (this batch and any older pending scans,
/// in capture order).
pub fn admit_and_decide(
    store: &mut Store,
    gate: &mut Gate,
    scans: &[Scan],
) -> Result<(Vec<bool>, Vec<Decision>), StoreError> {
    let facility = gate.facility().to_string();
    let (fresh, decided) =
        store.admit_and(&facility, scans, |tx| gate.write_and_decide(tx, scans))?;
    // (A failure to decide was logged: the scans wait as pending.)
    let Ok(decided) = decided else {
        return Ok((fresh, Vec::new()));
    };
    let mut decisions = gate.settle(decided);
    if decisions.len() == DECIDE_BATCH {
        decisions.extend(decide_pending(store, gate)?);
    }
    Ok((fresh, decisions))
}

/// Decide every pending scan, oldest capture first, [`DECIDE_BATCH`] per
/// transaction. Returns the decisions in the order they were made.
pub fn decide_pending(store: &mut Store, gate: &mut Gate) -> Result<Vec<Decision>, StoreError> {
    let mut all = Vec::new();
    loop {
        let w = store.write()?;
        let decided = gate.decide(&w).map_err(|e| w.err(e))?;
        w.commit()?;
        let batch = gate.settle(decided);
        let done = batch.len() < DECIDE_BATCH;
        all.extend(batch);
        if done {
            return Ok(all);
        }
    }
}

/// [`admit_and_decide`], returning each submitted scan's decision (for a
/// UUID seen before, its first one): the synchronous pipeline used by
/// tests, the benchmark and tools.
pub fn submit(
    store: &mut Store,
    gate: &mut Gate,
    scans: &[Scan],
) -> Result<Vec<Decision>, StoreError> {
    admit_and_decide(store, gate, scans)?;
    scans
        .iter()
        .map(|s| {
            decision_of(store, &s.uuid.to_string()).map(|d| {
                d.unwrap_or(Decision {
                    scan_uuid: s.uuid.to_string(),
                    verdict: Verdict::Pending,
                    content_key: None,
                    ambiguous: false,
                    scanner: s.profile.scanner.clone(),
                    read_boot_ns: None,
                    was: crate::model::ScanState::Pending,
                    told_as: None,
                    alert: None,
                    acknowledged: None,
                })
            })
        })
        .collect()
}
