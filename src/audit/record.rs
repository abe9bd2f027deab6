//! The audit record: its fields, in their canonical order, and the two ways
//! one is made — a decision about a scan ([`AuditRecord::decision`]) and a
//! record of the system's own about no scan ([`AuditRecord::system`]). A
//! field added to the record is added here, to the struct and to both
//! constructors; every writer sets only what its record says.

use crate::capture::clock::rfc3339_ms;
use crate::model::{AlertFound, ScanState};
use serde::{Deserialize, Serialize};

/// What a decision's record says of its scan.
#[derive(Debug, Clone, Copy)]
pub struct ScanFacts<'a> {
    /// The scanner that read it.
    pub scanner: &'a str,
    /// The scan's UUID.
    pub uuid: &'a str,
    /// Its capture on the gateway's wall clock (ms since the epoch).
    pub captured_ms: i64,
    /// Whether that clock was synchronised at capture.
    pub clock_synced: bool,
    /// The raw frame's length in bytes.
    pub raw_len: i64,
}

impl<'a> ScanFacts<'a> {
    /// What an outbox row says of its scan (its wall stamp as captured).
    pub fn of(row: &'a crate::outbox::ScanRow) -> ScanFacts<'a> {
        ScanFacts {
            scanner: &row.scanner,
            uuid: &row.uuid,
            captured_ms: row.time.utc_ms,
            clock_synced: row.time.synced,
            raw_len: row.raw_len,
        }
    }
}

impl AuditRecord {
    /// A record of `decision` about the scan `scan`, made at `at_ms` by
    /// `gateway`; every part a decision may carry (its content key, twin,
    /// reason, facility time, ledger hash, …) absent, for the writer to set
    /// (`AuditRecord { reason, ..AuditRecord::decision(…) }`).
    pub fn decision(
        at_ms: i64,
        gateway: &str,
        scan: ScanFacts<'_>,
        decision: ScanState,
    ) -> AuditRecord {
        AuditRecord {
            seq: 0,
            at: rfc3339_ms(at_ms),
            gateway: gateway.to_string(),
            scanner: scan.scanner.to_string(),
            scan_uuid: scan.uuid.to_string(),
            captured_at: rfc3339_ms(scan.captured_ms),
            clock_synced: scan.clock_synced,
            facility_at: None,
            clock_offset_ms: None,
            clock_error_ms: None,
            decision,
            content_key: None,
            twin_uuid: None,
            reason: None,
            raw_len: scan.raw_len,
            conflict: None,
            state_reset: None,
            ledger_hash: None,
            pruned: None,
            ambiguous: None,
            declared: None,
            dea_schedule: None,
            alerts: None,
            acknowledged: None,
        }
    }

    /// A record of the system's own about no scan (a state reset, a
    /// checkpoint), made at `at_ms` by `gateway`: `id` in its `scan_uuid`,
    /// decision `pending`, `reason` saying what happened; the part that
    /// says it in full is for the writer to set.
    pub fn system(at_ms: i64, gateway: &str, id: String, reason: String) -> AuditRecord {
        AuditRecord {
            scan_uuid: id,
            reason: Some(reason),
            ..AuditRecord::decision(
                at_ms,
                gateway,
                ScanFacts {
                    scanner: "",
                    uuid: "",
                    captured_ms: at_ms,
                    clock_synced: crate::capture::clock::CaptureTime::now().synced,
                    raw_len: 0,
                },
                ScanState::Pending,
            )
        }
    }
}

/// One audit record. Field order is the canonical order.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AuditRecord {
    /// Position in the chain (1, 2, …); set by [`super::Chain::append`].
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
    /// The item's DEA schedule (`CI` … `CV`), as the product data
    /// lists it at the decision; absent for an item it does not list as
    /// controlled, without product data, and on records written before
    /// the checks were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dea_schedule: Option<String>,
    /// What the checks at the counter found about the item (most urgent
    /// first: the one the scanner was told). Absent when nothing was
    /// found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alerts: Option<Vec<AlertFound>>,
    /// Only on an ACKNOWLEDGE control read: the alerted reads (scan
    /// UUIDs) of its scanner it acknowledged, oldest first; empty when
    /// none was open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acknowledged: Option<Vec<String>>,
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
