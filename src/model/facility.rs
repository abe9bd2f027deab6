//! What scangate knows of the facility store, as the claimer records it
//! for `status` and the events report it: the facility's clock
//! ([`ClockSample`]), whether it answers ([`FacilityState`]), its server
//! ([`ServerInfo`]), scanner names another gateway uses too
//! ([`ScannerClone`]), a reconciliation after it lost data
//! ([`Reconciliation`], [`ConflictRecord`]), and its ledger stream's
//! consumers ([`LedgerStream`]).

/// One measurement of the facility Redis's clock (`TIME`) against this
/// gateway's clocks, by Cristian's method: of several round trips, the
/// shortest; the server read its clock somewhere within it, so the offset
/// is known to ± half of it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClockSample {
    /// The facility's time minus this gateway's wall clock, in ms: negative
    /// when this gateway's clock is ahead.
    pub offset_ms: f64,
    /// The offset is within ± this many ms (half the round trip).
    pub bound_ms: f64,
    /// The facility's time minus this gateway's boot clock
    /// (`CLOCK_BOOTTIME`), in ms: a capture of this boot mapped to facility
    /// time is its boot stamp plus this.
    pub boot_offset_ms: f64,
    /// The boot `boot_offset_ms` belongs to.
    pub boot_id: String,
    /// When it was measured (this gateway's wall clock, Unix ms).
    pub at_ms: i64,
    /// The boot clock when it was measured (ms), mid-way through the
    /// chosen round trip.
    #[serde(default)]
    pub boot_ms: i64,
}

/// A scanner name this gateway uses as its own that another gateway of the
/// facility uses too (neither declares it `shared`): a cloned config. Its
/// reads still count on each gateway (the gateway id is in their content
/// keys); the names should differ, so a reader of the ledger tells them
/// apart.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ScannerClone {
    /// The scanner name.
    pub scanner: String,
    /// The other gateway that uses it.
    pub other_gateway: String,
}

/// Facts logged at start-up.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    /// `redis_version`.
    pub version: String,
    /// `maxmemory-policy`.
    pub maxmemory_policy: String,
    /// `appendonly` (AOF on or off).
    pub appendonly: String,
    /// `save` (RDB snapshots).
    pub save: String,
    /// `role` from `INFO replication`: `master`, or `slave` for a
    /// read-only replica (which refuses every claim).
    pub role: String,
    /// `connected_slaves` from `INFO replication`: the replicas attached.
    pub connected_replicas: u32,
    /// The server has `WAITAOF` (Redis 7.2 and later, Valkey).
    pub has_waitaof: bool,
}

impl ServerInfo {
    /// Whether each round is to wait for the server's own AOF fsync
    /// (`Facility::set_on_disk`): a primary with `WAITAOF` and
    /// `appendonly yes`. Not a replica: it refuses `WAITAOF` from anyone,
    /// which would fail every round, also one that only asks again for
    /// decisions it has (a replica answers those, as the design promises).
    pub fn confirms_on_disk(&self) -> bool {
        self.has_waitaof && self.appendonly == "yes" && self.role != "slave"
    }
}

/// One reconciliation (`outbox status`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Reconciliation {
    /// When it began (Unix ms, wall clock).
    pub at_ms: i64,
    /// This gateway's commit the store had lost (how it was detected).
    pub lost_marker: String,
    /// Commits of the retention horizon re-published.
    pub republished: usize,
    /// Of them, suppressed as echoes of another gateway's commit (conflicts).
    pub conflicts: usize,
    /// How long it took.
    pub took_ms: i64,
}

/// A pick committed here and, as a separate pick, by another gateway
/// while the facility store had lost data (`outbox status`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ConflictRecord {
    /// This gateway's committed scan.
    pub scan_uuid: String,
    /// The other gateway's committed scan.
    pub other_scan_uuid: String,
    /// The other gateway, when known.
    pub other_gateway: Option<String>,
    /// When it was found (Unix ms, wall clock).
    pub at_ms: i64,
}

/// Whether the facility store answered the claimer's last claims, since
/// when, and if not why: for `scangate outbox status`, so a technician sees
/// the reason without reading the logs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FacilityState {
    /// Claims are answered.
    pub answering: bool,
    /// Since when (Unix ms, wall clock).
    pub since_ms: i64,
    /// Why not, while not answering.
    pub reason: Option<String>,
}

/// The facility ledger stream as the last trim found it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LedgerStream {
    /// When (the server's clock, Unix ms).
    pub at_ms: i64,
    /// Entries in the stream after the trim.
    pub length: u64,
    /// Entries this trim removed.
    pub trimmed: u64,
    /// Every registered consumer group.
    pub groups: Vec<LedgerGroup>,
}

/// One consumer group of the ledger stream.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LedgerGroup {
    /// Its name.
    pub name: String,
    /// Entries delivered to it and not acknowledged yet.
    pub pending: u64,
    /// Its oldest entry not acknowledged (pending, or not read yet): the
    /// stream id (`None`: it has acknowledged everything).
    pub oldest_unacked: Option<String>,
}

impl LedgerGroup {
    /// When its oldest unacknowledged entry was appended (the server's
    /// Unix ms, from the stream id).
    pub fn oldest_unacked_ms(&self) -> Option<i64> {
        self.oldest_unacked.as_deref().and_then(id_ms)
    }
}

impl LedgerStream {
    /// The oldest unacknowledged entry over every group: the group and the
    /// entry's time (server Unix ms).
    pub fn oldest_unacked(&self) -> Option<(&str, i64)> {
        self.groups
            .iter()
            .filter_map(|g| Some((g.name.as_str(), g.oldest_unacked_ms()?)))
            .min_by_key(|(_, ms)| *ms)
    }
}

/// The ms part of a stream id (`<ms>-<seq>`).
pub fn id_ms(id: &str) -> Option<i64> {
    id.split_once('-').and_then(|(ms, _)| ms.parse().ok())
}

/// How a claimed scan's capture time was put on facility time: what its
/// audit record keeps beside the gateway's own wall stamp.
#[derive(Debug, Clone, PartialEq)]
pub struct ClockUsed {
    /// The gateway's wall stamp of the capture (Unix ms).
    pub wall_ms: i64,
    /// Whether the kernel called the wall clock synchronised at capture.
    pub wall_synced: bool,
    /// Facility time minus the wall stamp, and the mapping's error bound
    /// (ms); `None` when the capture could not be mapped (see `note`).
    pub mapped: Option<(i64, i64)>,
    /// Why the time was taken as it was, when not mapped within the bound.
    pub note: Option<String>,
}
