//! The facility ledger stream: trimmed by the claimer, followed by `ledger export --follow`.

use super::Event;
use std::time::Duration;

// The log targets operators filter on (`RUST_LOG`, the journal): keep the values.
const LANE_TARGET: &str = "scangate::daemon::claimer::lane";
const STREAM_TARGET: &str = "scangate::facility::stream";

/// The claimer's trim step of the facility ledger stream.
pub enum LedgerTrim<'a> {
    /// Trimming failed (WARN), tried again in `every`.
    Failed {
        /// The Redis, as shown.
        redis: &'a str,
        /// The stream's key.
        stream: &'a str,
        /// Why.
        error: &'a dyn std::fmt::Display,
        /// Until the next attempt.
        every: Duration,
    },
    /// No consumer group reads it: it is never trimmed (WARN).
    NoGroup {
        /// The Redis, as shown.
        redis: &'a str,
        /// The stream's key.
        stream: &'a str,
        /// Its length.
        entries: u64,
    },
    /// A consumer group reads it now (INFO).
    GroupReads {
        /// The Redis, as shown.
        redis: &'a str,
        /// How many groups.
        groups: usize,
    },
    /// Acknowledged entries were trimmed (INFO).
    Trimmed {
        /// The Redis, as shown.
        redis: &'a str,
        /// How many.
        trimmed: u64,
        /// How many are left.
        entries: u64,
    },
}

impl Event for LedgerTrim<'_> {
    /// Log it: WARN when it failed or nobody reads the stream, else INFO.
    fn emit(self) {
        match self {
            LedgerTrim::Failed {
                redis,
                stream,
                error,
                every,
            } => tracing::warn!(
                target: LANE_TARGET,
                redis = %redis,
                "trimming the facility ledger stream {stream} failed: {error}; tried again in {every:?}"
            ),
            LedgerTrim::NoGroup {
                redis,
                stream,
                entries,
            } => tracing::warn!(
                target: LANE_TARGET,
                redis = %redis, stream = %stream, entries,
                "no consumer group reads the facility ledger stream {stream}: it is never trimmed, and the facility Redis's memory grows with every pick ({entries} entries) until it refuses claims. Fix: have the inventory system read it with a consumer group, e.g. `scangate ledger export --follow --group inventory` (docs/design.md, \"Ledger consumers and trimming\")"
            ),
            LedgerTrim::GroupReads { redis, groups } => tracing::info!(
                target: LANE_TARGET,
                redis = %redis, groups,
                "a consumer group reads the facility ledger stream now: acknowledged entries are trimmed"
            ),
            LedgerTrim::Trimmed {
                redis,
                trimmed,
                entries,
            } => tracing::info!(
                target: LANE_TARGET,
                redis = %redis, trimmed, entries,
                "trimmed {trimmed} entries every consumer group had acknowledged from the facility ledger stream; {entries} left"
            ),
        }
    }
}

/// `ledger export --follow` with a consumer group (target
/// `scangate::facility::stream`).
pub enum LedgerFollow<'a> {
    /// The group was created, reading from the first entry (INFO).
    GroupCreated {
        /// The stream's key.
        stream: &'a str,
        /// The group.
        group: &'a str,
    },
    /// Following failed; it reconnects after `wait` (WARN).
    Failed {
        /// The group.
        group: &'a str,
        /// The consumer.
        consumer: &'a str,
        /// Why.
        error: &'a dyn std::fmt::Display,
        /// Until it reconnects.
        wait: Duration,
    },
    /// Entries delivered to other consumers of the group and left
    /// unacknowledged longer than `idle` were claimed by this one (WARN:
    /// a consumer is gone, or stuck).
    Claimed {
        /// The group.
        group: &'a str,
        /// The consumer that claimed them.
        consumer: &'a str,
        /// How many.
        entries: usize,
        /// The idle time they had reached at least.
        idle: Duration,
    },
    /// The server refuses `XAUTOCLAIM` (the ACL user lacks
    /// `+xautoclaim`, or a Redis before 6.2): this follower claims
    /// nothing and goes on (WARN).
    ClaimRefused {
        /// The group.
        group: &'a str,
        /// The consumer.
        consumer: &'a str,
        /// What the server said.
        error: &'a dyn std::fmt::Display,
    },
}

impl Event for LedgerFollow<'_> {
    /// Log it: INFO when the group is created, WARN when following failed
    /// or entries were claimed from another consumer.
    fn emit(self) {
        match self {
            LedgerFollow::Claimed {
                group,
                consumer,
                entries,
                idle,
            } => tracing::warn!(
                target: STREAM_TARGET,
                group,
                consumer,
                entries,
                "consumer {consumer:?} of group {group:?} claimed {entries} entries another consumer was given and left unacknowledged for over {idle:?} (gone, or stuck); they are printed again here (dedup by scan_uuid)"
            ),
            LedgerFollow::ClaimRefused {
                group,
                consumer,
                error,
            } => tracing::warn!(
                target: STREAM_TARGET,
                group,
                consumer,
                "consumer {consumer:?} of group {group:?} cannot claim what other consumers left unacknowledged: {error}; it follows the stream without (grant the ACL user +xautoclaim, Redis 6.2 or later; or pass --claim-idle-secs 0)"
            ),
            LedgerFollow::GroupCreated { stream, group } => tracing::info!(
                target: STREAM_TARGET,
                stream = %stream, group,
                "consumer group created on the facility ledger stream, reading from its first entry"
            ),
            LedgerFollow::Failed {
                group,
                consumer,
                error,
                wait,
            } => tracing::warn!(
                target: STREAM_TARGET,
                group,
                consumer,
                "following the facility ledger stream as consumer {consumer:?} of group {group:?} failed: {error}; reconnecting in {wait:?} (entries printed and not acknowledged are printed again)"
            ),
        }
    }
}
