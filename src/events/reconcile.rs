//! Reconciliation: the facility store lost data and this gateway re-publishes its commits.

use super::Event;
use std::time::Duration;

// The log targets operators filter on (`RUST_LOG`, the journal): keep the values.
const LANE_TARGET: &str = "scangate::daemon::claimer::lane";
const RECONCILE_TARGET: &str = "scangate::daemon::claimer::reconcile";

/// The facility store lost data: the reconciliation's course (WARN).
pub enum Reconcile<'a> {
    /// A commit of this gateway's is missing: re-publishing begins.
    Begins {
        /// The Redis, as shown.
        redis: &'a str,
        /// `live` or `replay`.
        lane: &'a str,
        /// The commit found missing.
        lost: &'a str,
        /// The retention horizon (hours).
        hours: i64,
    },
    /// It is done.
    Done {
        /// The Redis, as shown.
        redis: &'a str,
        /// `live` or `replay`.
        lane: &'a str,
        /// What it did.
        done: &'a crate::model::Reconciliation,
    },
    /// It failed; tried again at the next claim.
    Failed {
        /// The Redis, as shown.
        redis: &'a str,
        /// `live` or `replay`.
        lane: &'a str,
        /// Why.
        error: &'a dyn std::fmt::Display,
    },
    /// A committed scan of the ledger is not in the outbox: re-published
    /// from its ledger entry.
    NotInOutbox {
        /// The scan.
        scan: &'a str,
    },
    /// A conflict: both gateways committed one label.
    Conflict {
        /// This gateway's scan.
        scan: &'a str,
        /// The other's.
        other_scan: &'a str,
        /// The other gateway, if known.
        other_gateway: Option<&'a str>,
        /// How the other gateway is named in prose (`gateway g-2`).
        by: &'a str,
    },
    /// Another gateway's reconciliation found conflicts with this one's.
    ConflictsNoticed {
        /// The Redis, as shown.
        redis: &'a str,
        /// How many.
        conflicts: usize,
    },
    /// The conflicts stream could not be read; read again in `every`.
    NoticesUnreadable {
        /// The Redis, as shown.
        redis: &'a str,
        /// Why.
        error: &'a dyn std::fmt::Display,
        /// Until the next read.
        every: Duration,
    },
}

impl Event for Reconcile<'_> {
    /// Log it (WARN).
    fn emit(self) {
        match self {
            Reconcile::Begins {
                redis,
                lane,
                lost,
                hours,
            } => tracing::warn!(
                target: LANE_TARGET,
                redis = %redis, lane, lost,
                "facility Redis {redis} has lost data: this gateway's commit {lost} is not there (emptied or replaced, a lagging replica promoted, or an older backup restored). Re-publishing this gateway's commits of the last {hours} h before claiming new scans"
            ),
            Reconcile::Done { redis, lane, done } => tracing::warn!(
                target: LANE_TARGET,
                redis = %redis, lane, republished = done.republished, conflicts = done.conflicts, took_ms = done.took_ms,
                "reconciled with facility Redis {redis}: re-published {} commits of this gateway in {} ms (each keeps its scan UUID: ledger consumers dedup by it); {} conflict(s){}. New scans are claimed again",
                done.republished, done.took_ms, done.conflicts,
                if done.conflicts > 0 { ": picks another gateway committed too while the store had lost data (see `scangate outbox status`)" } else { "" }
            ),
            Reconcile::Failed { redis, lane, error } => tracing::warn!(
                target: LANE_TARGET,
                redis = %redis, lane,
                "reconciling with facility Redis {redis} failed: {error}. No new scan is claimed until it succeeds; it is tried again at the next claim"
            ),
            Reconcile::NotInOutbox { scan } => tracing::warn!(
                target: RECONCILE_TARGET,
                scan = %scan,
                "committed scan {scan} is in this gateway's ledger but no longer in its outbox (the sweeper removes decided rows by the wall clock, which may have been stepped): it is re-published from its ledger entry"
            ),
            Reconcile::Conflict {
                scan,
                other_scan,
                other_gateway,
                by,
            } => {
                tracing::warn!(
                    target: RECONCILE_TARGET,
                    scan = %scan, other_scan = %other_scan, other_gateway = other_gateway.unwrap_or("unknown"),
                    "conflict: this gateway's committed scan {scan} and {by}'s scan {other_scan} were both committed as picks of one label while the facility store had lost data; the facility ledger keeps one entry, but both gateways' ledgers have theirs. Check which is right and correct the ledger by hand (`scangate audit trace {scan}`)"
                );
            }
            Reconcile::ConflictsNoticed { redis, conflicts } => tracing::warn!(
                target: LANE_TARGET,
                redis = %redis, conflicts,
                "another gateway's reconciliation found {conflicts} conflict(s) with this gateway's commits (see above, `scangate outbox status` and `scangate audit trace <scan>`)"
            ),
            Reconcile::NoticesUnreadable {
                redis,
                error,
                every,
            } => tracing::warn!(
                target: LANE_TARGET,
                redis = %redis,
                "reading the facility's conflicts stream failed: {error}; read again in {every:?}"
            ),
        }
    }
}

/// Probing the facility Redis for this gateway's latest commits (is one
/// lost?) failed (DEBUG): the lane connects afresh, and the next probe
/// tries again.
pub struct LostCommitProbeFailed<'a> {
    /// The Redis, as shown.
    pub redis: &'a str,
    /// Why.
    pub error: &'a dyn std::fmt::Display,
}

impl Event for LostCommitProbeFailed<'_> {
    /// Log it (DEBUG).
    fn emit(self) {
        let e = self.error;
        tracing::debug!(target: LANE_TARGET, redis = %self.redis, "probing the facility Redis for this gateway's latest commits failed: {e}");
    }
}
