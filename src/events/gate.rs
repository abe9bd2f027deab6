//! Decisions: each one logged and counted; a commit past the facility retention; a step of the facility clock.

use super::Event;
use crate::model::{Decision, Verdict};
use crate::telemetry::Telemetry;
use std::time::Duration;

// The log targets operators filter on (`RUST_LOG`, the journal): keep the values.
const DAEMON_TARGET: &str = "scangate::daemon";
const GATE_TARGET: &str = "scangate::gate";

/// The log target of rejected reads ([`Decided`]): `RUST_LOG=…,scangate::reject=error`
/// silences them alone (the demo does, it tabulates them).
pub const REJECT_TARGET: &str = "scangate::reject";

/// The state holds commits an earlier release keyed in another form: reads
/// are also looked up under it until `until_ms` (INFO, at start).
pub struct EarlierKeys {
    /// The last capture time bridged (Unix ms).
    pub until_ms: i64,
}

impl Event for EarlierKeys {
    /// Log it (INFO).
    fn emit(self) {
        tracing::info!(
            target: GATE_TARGET,
            until = %crate::capture::clock::rfc3339_ms(self.until_ms),
            "this state holds commits an earlier release keyed without the gateway's name: reads of this gateway's own scanners are also matched against them until {}, so a read straddling the upgrade is still an echo",
            crate::capture::clock::rfc3339_ms(self.until_ms)
        );
    }
}

/// Decisions were committed (by the embedded gate, or a claimer round).
pub struct Decided<'a> {
    /// Them, in the order they were made.
    pub decisions: &'a [Decision],
    /// The metrics it updates.
    pub telemetry: &'a Telemetry,
}

impl Event for Decided<'_> {
    /// Log each — a rejected read at WARN with its reason (not only in its
    /// audit record: hiding those must not hide rejects), the others at
    /// DEBUG — and count each (`Telemetry::count_decision`).
    fn emit(self) {
        let now = crate::capture::clock::boot_ns();
        for d in self.decisions {
            let decision = d.verdict.state();
            match &d.verdict {
                Verdict::Rejected { reason } => tracing::warn!(
                    target: REJECT_TARGET,
                    scanner = %d.scanner, scan_uuid = %d.scan_uuid, decision = %decision, reason = %reason,
                    "scan rejected: {reason}"
                ),
                Verdict::Committed | Verdict::Unresolved { .. }
                    if let Some(alert) = d.alert
                        && d.was != crate::model::ScanState::Unresolved =>
                {
                    tracing::info!(
                        target: DAEMON_TARGET,
                        scanner = %d.scanner, scan_uuid = %d.scan_uuid, decision = %decision, alert = alert.as_str(),
                        "decided {decision}, the item {}: the scanner is told {alert}",
                        alert.what()
                    )
                }
                _ => tracing::debug!(
                    target: DAEMON_TARGET,
                    scanner = %d.scanner, scan_uuid = %d.scan_uuid, decision = %decision,
                    "decided"
                ),
            }
            self.telemetry.count_decision(d, now);
        }
        if self.telemetry.tapped() {
            self.telemetry.tap_decided(self.decisions, now);
        }
    }
}

/// A claimer round committed scans captured longer ago than the
/// facility's retention (less the window): the facility store may have
/// forgotten another gateway's read of the same pick, so each may be a
/// second entry for it (each commit's audit record says so).
pub struct CommittedPastRetention {
    /// How many in this round.
    pub scans: usize,
    /// The facility's retention.
    pub retention: Duration,
}

impl Event for CommittedPastRetention {
    /// Log it (WARN).
    fn emit(self) {
        let hours = self.retention.as_secs() / 3600;
        tracing::warn!(
            target: GATE_TARGET,
            scans = self.scans, retention_h = hours,
            "committed {} scan(s) captured longer ago than the facility's retention of {hours} h (a backlog older than that, after a long outage): the facility store keeps capture times for the retention only, so another gateway's read of the same pick may no longer be known to it; `audit trace` shows each ('past the facility's retention'): check the facility ledger for a twin",
            self.scans
        );
    }
}

/// Two measurements of the facility clock in a row are not one continuous
/// clock: it stepped between them (a failover to a server whose clock
/// differs, or a step of the server's own clock). Facility time is the
/// one clock every gateway compares captures on, so this is a WARN; a
/// capture read between the two measurements is claimed with the step in
/// its error (`claimer::facility_time`).
pub struct FacilityClockStepped {
    /// How far (ms, signed: later is positive).
    pub step_ms: f64,
    /// `[dedup] window_ms`: a step beyond it can let two gateways' reads of
    /// one pick fall outside each other's window.
    pub window_ms: i64,
}

impl Event for FacilityClockStepped {
    /// Log it: WARN from 5 % of the window on (a server's NTP slewing its
    /// clock quickly moves it by a few ms too: INFO).
    fn emit(self) {
        let step = self.step_ms;
        let window = self.window_ms;
        if step.abs() * 20.0 >= window as f64 {
            tracing::warn!(
                target: GATE_TARGET,
                step_ms = step,
                window_ms = window,
                "the facility Redis's clock stepped by {step:.0} ms between two measurements (a failover to a server whose clock differs, or a step of the server's clock): scans read between them are claimed with that in their clock error, and until every gateway has measured the clock again their reads of one pick may be {step:.0} ms apart on facility time (the echo window is {window} ms). Keep the facility Redis and its replicas on NTP"
            );
        } else {
            tracing::info!(
                target: GATE_TARGET,
                step_ms = step,
                window_ms = window,
                "the facility Redis's clock moved by {step:.0} ms between two measurements, more than drift explains (its NTP adjusting it?): scans read between them are claimed with that in their clock error"
            );
        }
    }
}
