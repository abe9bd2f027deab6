//! The facility claimer: the facility Redis reached, lost, refusing, confirming; a lane's database step failing; recording its verdicts.

use super::Event;
use std::time::Duration;

// The log targets operators filter on (`RUST_LOG`, the journal): keep the values.
const CLAIMER_TARGET: &str = "scangate::daemon::claimer";
const LANE_TARGET: &str = "scangate::daemon::claimer::lane";
const FACILITY_TARGET: &str = "scangate::facility";

/// A claimer lane found the facility Redis unavailable: an outage begins,
/// or goes on. (`scangate_facility_up` is sampled from the state the lane
/// records in the same step, which `scangate status` reads too.)
pub struct FacilityUnavailable<'a> {
    /// The Redis, as shown (credentials redacted).
    pub redis: &'a str,
    /// `live` or `replay`.
    pub lane: &'a str,
    /// Why.
    pub reason: &'a str,
    /// Where the outage stands.
    pub outage: Outage,
}

/// How far an outage of the facility store has gone ([`FacilityUnavailable`]).
pub enum Outage {
    /// It begins.
    Begins,
    /// It goes on: the live lane, retried with the next scan.
    Continues,
    /// It goes on: the replay lane's retry, the backlog as it stands (or why
    /// it cannot be read) and when it is tried again.
    Backlog {
        /// Scans waiting, and the oldest one's age in seconds.
        waiting: Result<(i64, i64), String>,
        /// The next attempt.
        next: Duration,
    },
}

impl Event for FacilityUnavailable<'_> {
    /// Log it: WARN when the outage begins and at each of the replay lane's
    /// retries, DEBUG at the live lane's.
    fn emit(self) {
        let (redis, lane, reason) = (self.redis, self.lane, self.reason);
        match self.outage {
            Outage::Begins => tracing::warn!(
                target: CLAIMER_TARGET,
                redis = %redis, lane, reason = %reason,
                "facility Redis unavailable: {reason}. Scans are kept in the outbox as unresolved and replayed in capture order when it answers"
            ),
            Outage::Continues => tracing::debug!(
                target: CLAIMER_TARGET,
                redis = %redis, lane, reason = %reason,
                "facility Redis still unavailable: {reason}"
            ),
            Outage::Backlog {
                waiting: Ok((waiting, oldest_s)),
                next,
            } => tracing::warn!(
                target: CLAIMER_TARGET,
                redis = %redis, lane, reason = %reason, waiting, oldest_s,
                "facility Redis still unavailable: {reason}. {waiting} scans wait in the outbox, the oldest captured {oldest_s} s ago; next attempt in {next:?}"
            ),
            Outage::Backlog {
                waiting: Err(e),
                next,
            } => tracing::warn!(
                target: CLAIMER_TARGET,
                redis = %redis, lane, reason = %reason,
                "facility Redis still unavailable: {reason} (backlog unknown: {e}); next attempt in {next:?}"
            ),
        }
    }
}

/// A claim round found the server without the claim script (`NOSCRIPT`:
/// another client flushed the script cache, or a failover reached a node
/// that never had it) and loaded it again, within the round.
pub struct ScriptReloaded<'a> {
    /// The Redis, as shown.
    pub redis: &'a str,
}

impl Event for ScriptReloaded<'_> {
    /// Log it (INFO).
    fn emit(self) {
        tracing::info!(
            target: FACILITY_TARGET,
            redis = %self.redis,
            "facility Redis had lost the claim script (NOSCRIPT: its script cache was flushed, or a failover reached a node that never had it); loaded it again and resent the round's calls it refused"
        );
    }
}

/// The facility's slot moved to another primary of the Redis Cluster
/// (`MOVED`: a resharding, or a failover): the connection follows it.
pub struct SlotMoved<'a> {
    /// The node it was at, as shown.
    pub from: &'a str,
    /// The node that owns the slot now, as shown.
    pub to: &'a str,
}

impl Event for SlotMoved<'_> {
    /// Log it (INFO).
    fn emit(self) {
        tracing::info!(
            target: FACILITY_TARGET,
            redis = %self.from,
            to = %self.to,
            "the facility's Redis Cluster slot moved (MOVED: a resharding or a failover); following it to {}",
            self.to
        );
    }
}

/// A claimer lane's facility Redis answers again after an outage.
pub struct FacilityAnswers<'a> {
    /// The Redis, as shown.
    pub redis: &'a str,
    /// `live` or `replay`.
    pub lane: &'a str,
    /// How long it was unavailable.
    pub outage: Duration,
    /// What the lane does now.
    pub doing: &'a str,
}

impl Event for FacilityAnswers<'_> {
    /// Log it (INFO).
    fn emit(self) {
        tracing::info!(
            target: CLAIMER_TARGET,
            redis = %self.redis, lane = self.lane, outage_s = self.outage.as_secs(),
            "facility Redis answers again; {}", self.doing
        );
    }
}

/// What a claimer lane failed to do on the local database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaneDbStep {
    /// Reading the open scans to claim.
    Reading,
    /// Writing the verdicts of a round (the rows stay open; their claims
    /// are idempotent).
    Writing,
}

/// A claimer lane's local database step failed; retried after a back-off.
pub struct LaneDbFailed<'a> {
    /// `live` or `replay`.
    pub lane: &'a str,
    /// Which step.
    pub step: LaneDbStep,
    /// What SQLite said.
    pub error: &'a dyn std::fmt::Display,
    /// When it is tried again.
    pub retry_in: Duration,
}

impl Event for LaneDbFailed<'_> {
    /// Log it (ERROR).
    fn emit(self) {
        let (lane, e, retry_in) = (self.lane, self.error, self.retry_in);
        match self.step {
            LaneDbStep::Reading => tracing::error!(
                target: CLAIMER_TARGET,
                lane,
                "reading open scans failed on the local database: {e}; retrying in {retry_in:?}"
            ),
            LaneDbStep::Writing => tracing::error!(
                target: CLAIMER_TARGET,
                lane,
                "writing verdicts failed on the local database: {e}; retrying in {retry_in:?}"
            ),
        }
    }
}

/// A claimer lane connected to the facility Redis (INFO): what the server
/// reports.
pub struct FacilityConnected<'a> {
    /// The Redis, as shown (credentials redacted).
    pub redis: &'a str,
    /// The server it reached (a sentinel's choice).
    pub server: &'a str,
    /// `live` or `replay`.
    pub lane: &'a str,
    /// What `INFO` said.
    pub info: &'a crate::model::ServerInfo,
}

impl Event for FacilityConnected<'_> {
    /// Log it (INFO).
    fn emit(self) {
        let (info, lane) = (self.info, self.lane);
        tracing::info!(
            target: CLAIMER_TARGET,
            redis = %self.redis, server = %self.server, lane, version = %info.version, maxmemory_policy = %info.maxmemory_policy,
            appendonly = %info.appendonly, save = %info.save, role = %info.role,
            replicas = info.connected_replicas, "facility Redis connected"
        );
    }
}

/// What a connect found wrong with the facility store (WARN).
pub enum FacilityWarning<'a> {
    /// It is a read-only replica: it refuses claims.
    ReadOnlyReplica {
        /// The Redis, as shown.
        redis: &'a str,
    },
    /// Its append-only file is off.
    AppendOnlyOff {
        /// The Redis, as shown.
        redis: &'a str,
    },
    /// A scanner of this gateway has the name of another gateway's.
    ScannerClone {
        /// The Redis, as shown.
        redis: &'a str,
        /// The scanner.
        scanner: &'a str,
        /// This gateway.
        gateway: &'a str,
        /// The other one.
        other_gateway: &'a str,
    },
    /// This gateway's scanners could not be recorded in it.
    ScannersNotRecorded {
        /// The Redis, as shown.
        redis: &'a str,
        /// Why.
        error: &'a dyn std::fmt::Display,
    },
}

impl Event for FacilityWarning<'_> {
    /// Log it (WARN).
    fn emit(self) {
        match self {
            FacilityWarning::ReadOnlyReplica { redis } => tracing::warn!(
                target: CLAIMER_TARGET,
                redis = %redis,
                "facility Redis is a read-only replica of another server: it refuses claims, so scans wait in the outbox until it is promoted. Point [redis] url at the primary"
            ),
            FacilityWarning::AppendOnlyOff { redis } => tracing::warn!(
                target: CLAIMER_TARGET,
                redis = %redis,
                "facility Redis has appendonly off: a Redis crash can lose recent claims; this gateway still suppresses echoes of its own commits"
            ),
            FacilityWarning::ScannerClone {
                redis,
                scanner,
                gateway,
                other_gateway,
            } => tracing::warn!(
                target: CLAIMER_TARGET,
                redis = %redis, scanner = %scanner, other_gateway = %other_gateway,
                "scanner {scanner:?} of this gateway ({gateway}) has the name of a scanner of gateway {other_gateway:?} (a cloned config?). Each counts its own reads; name them apart so the ledger tells them apart. Fix: rename one, or, if it is one scanner heard by both gateways, set shared = true in its [[scanner]] on both"
            ),
            FacilityWarning::ScannersNotRecorded { redis, error } => tracing::warn!(
                target: CLAIMER_TARGET,
                redis = %redis,
                "could not record this gateway's scanners in the facility store ({error}); a cloned scanner name goes unnoticed until the next connect"
            ),
        }
    }
}

/// What confirms a claim round: the replicas waited for (told at connect
/// and when the count changes).
pub enum Confirmation<'a> {
    /// Replicas are connected but none is waited for (WARN).
    Unwaited {
        /// The Redis, as shown.
        redis: &'a str,
        /// `live` or `replay`.
        lane: &'a str,
        /// Replicas connected.
        connected: u32,
    },
    /// No replica is connected: the primary's answer decides (INFO).
    PrimaryOnly {
        /// The Redis, as shown.
        redis: &'a str,
        /// `live` or `replay`.
        lane: &'a str,
        /// The WAITAOF clause, or empty.
        disk: &'a str,
    },
    /// `wanted` of `connected` replicas confirm (INFO).
    Replicas {
        /// The Redis, as shown.
        redis: &'a str,
        /// `live` or `replay`.
        lane: &'a str,
        /// Replicas connected.
        connected: u32,
        /// Replicas waited for.
        wanted: u32,
        /// The WAITAOF clause, or empty.
        disk: &'a str,
    },
    /// Fewer replicas are connected than before (WARN).
    ReplicasLeft {
        /// The Redis, as shown.
        redis: &'a str,
        /// `live` or `replay`.
        lane: &'a str,
        /// Replicas connected now.
        now: u32,
        /// Before.
        before: u32,
    },
}

impl Event for Confirmation<'_> {
    /// Log it: WARN when replicas are not waited for or left, else INFO.
    fn emit(self) {
        match self {
            Confirmation::Unwaited {
                redis,
                lane,
                connected,
            } => tracing::warn!(
                target: CLAIMER_TARGET,
                redis = %redis, lane, replicas = connected,
                "{connected} replicas are connected to the facility Redis, but min_replicas_ack = 0: claims count as decided before any replica has them, so a failover can lose committed picks from the facility ledger. Fix: remove min_replicas_ack (default \"auto\": every connected replica)"
            ),
            Confirmation::PrimaryOnly { redis, lane, disk } => tracing::info!(
                target: CLAIMER_TARGET,
                redis = %redis, lane, replicas = 0,
                "claims count as decided when the primary answers{disk}: no replica is connected (a replica attached later is waited for from the next check, at most a minute on; one that was not connected cannot safely be promoted)"
            ),
            Confirmation::Replicas {
                redis,
                lane,
                connected,
                wanted,
                disk,
            } => tracing::info!(
                target: CLAIMER_TARGET,
                redis = %redis, lane, replicas = connected, wanted,
                "claims count as decided once {wanted} of {connected} connected replicas confirmed them (WAIT){disk}; until then the scans wait as unresolved"
            ),
            Confirmation::ReplicasLeft {
                redis,
                lane,
                now,
                before,
            } => tracing::warn!(
                target: CLAIMER_TARGET,
                redis = %redis, lane, replicas = now, before,
                "the facility Redis now reports {now} connected replicas, {before} before: claims are confirmed by {now} from now on. A replica that left cannot safely be promoted until it has caught up again; if the primary itself was cut off from its replicas (a network partition), claims it takes now are only in its own memory. Fix: bring the replica back (or set min_replicas_ack to a number to hold claims until that many confirm)"
            ),
        }
    }
}

/// What the claimer could not record in the local database for `outbox
/// status` (or its clock mapping); written again later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recording {
    /// Whether the facility store answers (the claimer's).
    FacilityState,
    /// The start-up connection's clock sample (a lane's).
    FirstClockSample,
    /// A clock sample: captures are mapped through the earlier ones.
    ClockSample,
    /// The facility clock, for `outbox status`.
    FacilityClock,
    /// The scanner clones.
    ScannerClones,
    /// The facility ledger stream, for `status`.
    LedgerStream,
    /// The scans waiting for the clock.
    WaitingForClock,
}

/// Recording something of the claimer's in the local database failed.
pub struct RecordingFailed<'a> {
    /// What.
    pub what: Recording,
    /// What SQLite said.
    pub error: &'a dyn std::fmt::Display,
}

impl Event for RecordingFailed<'_> {
    /// Log it (WARN).
    fn emit(self) {
        let e = self.error;
        match self.what {
            Recording::FacilityState => tracing::warn!(
                target: CLAIMER_TARGET,
                "recording the facility store's state for `outbox status` failed: {e}"
            ),
            Recording::FirstClockSample => tracing::warn!(
                target: LANE_TARGET,
                "recording the facility clock sample failed: {e}"
            ),
            Recording::ClockSample => tracing::warn!(
                target: LANE_TARGET,
                "recording the facility clock sample failed: {e}; captures are mapped through the earlier ones"
            ),
            Recording::FacilityClock => tracing::warn!(
                target: LANE_TARGET,
                "recording the facility clock for `outbox status` failed: {e}"
            ),
            Recording::ScannerClones => tracing::warn!(
                target: LANE_TARGET,
                "recording the scanner clones for `outbox status` failed: {e}"
            ),
            Recording::LedgerStream => tracing::warn!(
                target: LANE_TARGET,
                "recording the facility ledger stream for `status` failed: {e}"
            ),
            Recording::WaitingForClock => tracing::warn!(
                target: LANE_TARGET,
                "recording the scans waiting for the clock for `outbox status` failed: {e}"
            ),
        }
    }
}

/// The facility Redis refuses this gateway's credentials (ERROR): scans
/// wait as unresolved.
pub struct FacilityRefuses<'a> {
    /// The Redis, as shown.
    pub redis: &'a str,
    /// `live` or `replay`.
    pub lane: &'a str,
    /// What it said.
    pub reason: &'a str,
}

impl Event for FacilityRefuses<'_> {
    /// Log it (ERROR).
    fn emit(self) {
        let reason = self.reason;
        tracing::error!(
            target: LANE_TARGET,
            redis = %self.redis, lane = self.lane,
            "facility Redis refuses this gateway: {reason}. Scans are kept in the outbox as unresolved (`scangate status` shows the gateway degraded), and claimed in capture order once it lets this gateway in again"
        );
    }
}
