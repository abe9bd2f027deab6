//! What the claimer records of the facility store, for `scangate status`,
//! `outbox status` and the metrics: whether it answers ([`FacilityState`]),
//! its clock ([`ClockSample`]), scanner names another gateway uses too,
//! scans waiting for facility time, the last reconciliation and the
//! conflicts it found, and the ledger stream as the last trim found it.
//! Each is a JSON value in the store's `meta` table under a key of its own
//! (written in a small transaction of its own, except the conflicts, which
//! go in with their audit records).

use crate::model::{
    ClockSample, ConflictRecord, FacilityState, LedgerStream, Reconciliation, ScannerClone,
};
use crate::store::{Store, StoreError, get_meta, put_meta};
use rusqlite::Connection;

/// `meta` key of [`FacilityState`].
const FACILITY_STATE: &str = "facility_state";
/// `meta` key of [`FacilityRecords::scanner_clones`].
const SCANNER_CLONES: &str = "scanner_clones";
/// `meta` key of [`FacilityRecords::waiting_for_clock`].
const WAITING_FOR_CLOCK: &str = "waiting_for_clock";
/// `meta` key of [`FacilityRecords::facility_clock`].
const FACILITY_CLOCK: &str = "facility_clock";
/// `meta` key of [`FacilityRecords::reconciliation`].
const RECONCILIATION: &str = "facility_reconciliation";
/// `meta` key of [`FacilityRecords::conflicts`].
const CONFLICTS: &str = "facility_conflicts";
/// `meta` key of the facility ledger stream as the last trim found it.
const LEDGER_STREAM: &str = "facility_ledger_stream";

/// How many conflicts `outbox status` keeps (the audit trail has them all).
pub const CONFLICTS_SHOWN: usize = 100;

/// What the claimer last recorded of the facility store, as `outbox status`
/// shows it.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct FacilityRecords {
    /// Whether the facility store answered the claimer's last claims
    /// (`None` before its first answer or failure, and without `[redis]`).
    pub facility: Option<FacilityState>,
    /// This gateway's scanner names another gateway of the facility uses
    /// too, neither declaring them `shared` (a cloned config), as the
    /// facility store said at the claimer's last connect.
    pub scanner_clones: Vec<ScannerClone>,
    /// The facility Redis's clock against this gateway's, as the claimer
    /// last measured it.
    pub facility_clock: Option<ClockSample>,
    /// Scans waiting until their capture maps to facility time within
    /// `[redis] max_clock_error_ms`, as the replay lane last counted them
    /// (0: none).
    pub waiting_for_clock: usize,
    /// The last reconciliation: the facility store had lost data and this
    /// gateway re-published its commits.
    pub reconciliation: Option<Reconciliation>,
    /// Picks this gateway committed that another gateway committed too
    /// while the facility store had lost data (the latest
    /// [`CONFLICTS_SHOWN`]).
    pub conflicts: Vec<ConflictRecord>,
}

/// Everything recorded.
pub fn read(store: &Store) -> Result<FacilityRecords, StoreError> {
    Ok(FacilityRecords {
        facility: store.meta_json(FACILITY_STATE)?,
        scanner_clones: store.meta_json(SCANNER_CLONES)?.unwrap_or_default(),
        facility_clock: store.meta_json(FACILITY_CLOCK)?,
        waiting_for_clock: store.meta_json(WAITING_FOR_CLOCK)?.unwrap_or_default(),
        reconciliation: store.meta_json(RECONCILIATION)?,
        conflicts: store.meta_json(CONFLICTS)?.unwrap_or_default(),
    })
}

/// Whether the facility store answers, and its clock, as last recorded
/// (`None` without `[redis]` or before the claimer's first word).
pub fn state_and_clock(
    store: &Store,
) -> Result<(Option<FacilityState>, Option<ClockSample>), StoreError> {
    Ok((
        store.meta_json(FACILITY_STATE)?,
        store.meta_json(FACILITY_CLOCK)?,
    ))
}

/// Record what the claimer now knows of the facility store (only on a
/// change).
pub fn set_state(store: &mut Store, state: &FacilityState) -> Result<(), StoreError> {
    store.set_meta_json(FACILITY_STATE, state)
}

/// Record the scanner clones the facility store named at a connect.
pub fn set_scanner_clones(store: &mut Store, clones: &[ScannerClone]) -> Result<(), StoreError> {
    store.set_meta_json(SCANNER_CLONES, &clones)
}

/// Record the latest measurement of the facility's clock.
pub fn set_clock(store: &mut Store, clock: &ClockSample) -> Result<(), StoreError> {
    store.set_meta_json(FACILITY_CLOCK, clock)
}

/// Record how many scans wait for facility time (only on a change).
pub fn set_waiting_for_clock(store: &mut Store, n: usize) -> Result<(), StoreError> {
    store.set_meta_json(WAITING_FOR_CLOCK, &n)
}

/// Record the facility ledger stream as the last trim found it.
pub fn set_ledger_stream(store: &mut Store, stream: &LedgerStream) -> Result<(), StoreError> {
    store.set_meta_json(LEDGER_STREAM, stream)
}

/// The facility ledger stream as the last trim found it (`None` without
/// `[redis]`, or before the first trim).
pub fn ledger_stream(store: &Store) -> Result<Option<LedgerStream>, StoreError> {
    store.meta_json(LEDGER_STREAM)
}

/// Record a reconciliation.
pub fn set_reconciliation(store: &mut Store, r: &Reconciliation) -> Result<(), StoreError> {
    store.set_meta_json(RECONCILIATION, r)
}

/// Add `found` to the conflicts `outbox status` shows (the latest
/// [`CONFLICTS_SHOWN`]), inside `tx` (the transaction of their audit
/// records).
pub fn add_conflicts(tx: &Connection, found: &[ConflictRecord]) -> rusqlite::Result<()> {
    let mut all: Vec<ConflictRecord> = get_meta(tx, CONFLICTS)?
        .and_then(|v| serde_json::from_str(&v).ok())
        .unwrap_or_default();
    all.extend_from_slice(found);
    let drop = all.len().saturating_sub(CONFLICTS_SHOWN);
    all.drain(..drop);
    let value = serde_json::to_string(&all).expect("conflicts serialise");
    put_meta(tx, CONFLICTS, &value)
}
