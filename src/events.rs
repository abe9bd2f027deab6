//! The daemon's operational events, typed (as vector's
//! `src/internal_events/`): one type per event, whose `emit` both logs it
//! (structured fields, fixed prose) and updates its metric in
//! [`Telemetry`], so the log and the metrics cannot disagree and the call
//! site says only *what happened*.
//!
//! Field names are the journal's too (upper-cased, [`crate::logging`]):
//! `scanner`, `device`, `scan_uuid`, `decision`, `reason`. Each event keeps
//! the log target of the module it happens in, so `RUST_LOG` filters by
//! module as before.
//!
//! Events without a metric of their own (a disk error, an anchor) only
//! log; they are here all the same, so every operational line is one type.

use crate::metrics::Telemetry;
use crate::model::{Decision, Verdict};
use std::time::Duration;

/// The log target of rejected reads ([`Decided`]): `RUST_LOG=…,scangate::reject=error`
/// silences them alone (the demo does, it tabulates them).
pub const REJECT_TARGET: &str = "scangate::reject";

/// A serial scanner's device was opened.
pub struct SerialConnected<'a> {
    /// The scanner's name.
    pub scanner: &'a str,
    /// The device path.
    pub device: &'a str,
    /// Line speed.
    pub baud: u32,
    /// Data bits, parity, stop bits (`8N1`).
    pub line: String,
    /// The framing, as `FrameSpec::describe` tells it.
    pub framing: String,
    /// Whether ACK/NAK is on.
    pub ack: bool,
}

impl SerialConnected<'_> {
    /// Log it (INFO) and mark the scanner up.
    pub fn emit(self, telemetry: &Telemetry) {
        tracing::info!(
            target: "scangate::source::serial",
            scanner = %self.scanner, device = %self.device, baud = self.baud,
            line = %self.line, framing = %self.framing, ack = self.ack,
            "scanner connected"
        );
        telemetry.scanner_connected(self.scanner, self.device);
    }
}

/// A serial scanner's device went away (it is reopened).
pub struct SerialLost<'a> {
    /// The scanner's name.
    pub scanner: &'a str,
    /// The device path.
    pub device: &'a str,
    /// Why.
    pub reason: &'a str,
    /// Bytes of a frame begun and not finished (never a read).
    pub partial_bytes: usize,
}

impl SerialLost<'_> {
    /// Log it (WARN; the partial frame too, if any) and mark the scanner
    /// down.
    pub fn emit(self, telemetry: &Telemetry) {
        telemetry.scanner_disconnected(self.scanner);
        if self.partial_bytes > 0 {
            tracing::warn!(
                target: "scangate::source::serial",
                scanner = %self.scanner, device = %self.device, bytes = self.partial_bytes,
                "scanner went away mid-frame; the partial frame was never a complete read"
            );
        }
        tracing::warn!(
            target: "scangate::source::serial",
            scanner = %self.scanner, device = %self.device, reason = %self.reason,
            "scanner disconnected: {}; reconnecting", self.reason
        );
    }
}

/// A HID scanner's device was opened.
pub struct HidConnected<'a> {
    /// The scanner's name.
    pub scanner: &'a str,
    /// `pos` or `keyboard`.
    pub mode: &'a str,
    /// The device, as the opener describes it.
    pub device: &'a str,
}

impl HidConnected<'_> {
    /// Log it (INFO) and mark the scanner up.
    pub fn emit(self, telemetry: &Telemetry) {
        tracing::info!(
            target: "scangate::source::hid",
            scanner = %self.scanner, mode = self.mode, device = %self.device,
            "HID scanner connected"
        );
        telemetry.scanner_connected(self.scanner, self.device);
    }
}

/// A HID scanner's device went away (it is reopened when it is back).
pub struct HidLost<'a> {
    /// The scanner's name.
    pub scanner: &'a str,
    /// Why.
    pub reason: &'a str,
}

impl HidLost<'_> {
    /// Log it (WARN) and mark the scanner down.
    pub fn emit(self, telemetry: &Telemetry) {
        tracing::warn!(
            target: "scangate::source::hid",
            scanner = %self.scanner, reason = %self.reason,
            "HID scanner disconnected: {}; reopening when it is back", self.reason
        );
        telemetry.scanner_disconnected(self.scanner);
    }
}

/// A scanner's device was closed because scangate stops.
pub struct ScannerClosed<'a> {
    /// The scanner's name.
    pub scanner: &'a str,
}

impl ScannerClosed<'_> {
    /// Log it (DEBUG) and mark the scanner down.
    pub fn emit(self, telemetry: &Telemetry) {
        tracing::debug!(target: "scangate::source", scanner = %self.scanner, "scanner closed");
        telemetry.scanner_disconnected(self.scanner);
    }
}

/// A scanner read a scan (before it is durable).
pub struct ScanRead<'a> {
    /// The scanner's name.
    pub scanner: &'a str,
}

impl ScanRead<'_> {
    /// Log it (TRACE) and count it.
    pub fn emit(self, telemetry: &Telemetry) {
        tracing::trace!(target: "scangate::source", scanner = %self.scanner, "scan read");
        telemetry.scan_read(self.scanner);
    }
}

/// An ACK was written, `took` after its frame was read.
pub struct Acked<'a> {
    /// The scanner's name.
    pub scanner: &'a str,
    /// Frame read to ACK written.
    pub took: Duration,
}

impl Acked<'_> {
    /// Log it (TRACE) and observe its latency.
    pub fn emit(self, telemetry: &Telemetry) {
        tracing::trace!(
            target: "scangate::source::serial",
            scanner = %self.scanner, took_us = self.took.as_micros() as u64,
            "ACK written"
        );
        telemetry.acked(self.took);
    }
}

/// Decisions were committed (by the embedded gate, or a claimer round).
pub struct Decided<'a> {
    /// Them, in the order they were made.
    pub decisions: &'a [Decision],
}

impl Decided<'_> {
    /// Log each — a rejected read at WARN with its reason (not only in its
    /// audit record: hiding those must not hide rejects), the others at
    /// DEBUG — and count each (`Telemetry::count_decision`).
    pub fn emit(self, telemetry: &Telemetry) {
        let now = crate::capture::clock::boot_ns();
        for d in self.decisions {
            let decision = d.verdict.state();
            match &d.verdict {
                Verdict::Rejected { reason } => tracing::warn!(
                    target: REJECT_TARGET,
                    scanner = %d.scanner, scan_uuid = %d.scan_uuid, decision = %decision, reason = %reason,
                    "scan rejected: {reason}"
                ),
                _ => tracing::debug!(
                    target: "scangate::daemon",
                    scanner = %d.scanner, scan_uuid = %d.scan_uuid, decision = %decision,
                    "decided"
                ),
            }
            telemetry.count_decision(d, now);
        }
    }
}

/// Scans could not be written to the outbox; the write is retried and no
/// ACK goes out before it succeeds.
pub struct OutboxWriteFailed<'a> {
    /// The database.
    pub db: &'a std::path::Path,
    /// How many scans the batch holds.
    pub scans: usize,
    /// What the database said.
    pub error: &'a dyn std::fmt::Display,
    /// When it is tried again.
    pub retry_in: Duration,
}

impl OutboxWriteFailed<'_> {
    /// Log it (ERROR).
    pub fn emit(self) {
        tracing::error!(
            target: "scangate::daemon",
            db = %self.db.display(), scans = self.scans,
            "cannot write scans to the outbox: {}; retrying in {:?} (no ACK is sent until this succeeds)",
            self.error, self.retry_in
        );
    }
}

/// A scan read while stopping could not be stored (the database refused
/// writes); it was not acknowledged.
pub struct ScanNotStored<'a> {
    /// The scanner's name.
    pub scanner: &'a str,
    /// The scan.
    pub scan_uuid: &'a str,
}

impl ScanNotStored<'_> {
    /// Log it (ERROR).
    pub fn emit(self) {
        tracing::error!(
            target: "scangate::daemon",
            scan_uuid = %self.scan_uuid, scanner = %self.scanner,
            "scan NOT stored (database refuses writes during shutdown); it was not acknowledged"
        );
    }
}

/// Where an audit chain head was to be anchored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnchorPlace {
    /// The `state-id` file, while running.
    StateFile,
    /// The `state-id` file, at stop.
    StateFileAtStop,
    /// The facility store.
    Facility,
}

/// The audit chain head was anchored outside the database.
pub struct AnchorWritten<'a> {
    /// The state's identity.
    pub state_id: &'a str,
    /// The head's position.
    pub seq: i64,
    /// The head's hash.
    pub hash: &'a str,
}

impl AnchorWritten<'_> {
    /// Log it (INFO, target `scangate::anchor`).
    pub fn emit(self) {
        tracing::info!(
            target: "scangate::anchor",
            state_id = %self.state_id, audit_head_seq = self.seq, audit_head_hash = %self.hash,
            "audit chain head anchored"
        );
    }
}

/// Anchoring the audit chain head failed (retried at the next tick).
pub struct AnchorFailed<'a> {
    /// Where.
    pub place: AnchorPlace,
    /// Why.
    pub error: &'a dyn std::fmt::Display,
}

impl AnchorFailed<'_> {
    /// Log it (WARN).
    pub fn emit(self) {
        let e = self.error;
        match self.place {
            AnchorPlace::StateFile => tracing::warn!(
                target: "scangate::daemon",
                "cannot anchor the audit chain head: {e}"
            ),
            AnchorPlace::StateFileAtStop => tracing::warn!(
                target: "scangate::daemon",
                "cannot anchor the audit chain head at stop: {e}"
            ),
            AnchorPlace::Facility => tracing::warn!(
                target: "scangate::daemon",
                "cannot anchor the audit chain head in the facility store: {e}"
            ),
        }
    }
}

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

impl FacilityUnavailable<'_> {
    /// Log it: WARN when the outage begins and at each of the replay lane's
    /// retries, DEBUG at the live lane's.
    pub fn emit(self) {
        let (redis, lane, reason) = (self.redis, self.lane, self.reason);
        match self.outage {
            Outage::Begins => tracing::warn!(
                target: "scangate::daemon::claimer",
                redis = %redis, lane, reason = %reason,
                "facility Redis unavailable: {reason}. Scans are kept in the outbox as unresolved and replayed in capture order when it answers"
            ),
            Outage::Continues => tracing::debug!(
                target: "scangate::daemon::claimer",
                redis = %redis, lane, reason = %reason,
                "facility Redis still unavailable: {reason}"
            ),
            Outage::Backlog {
                waiting: Ok((waiting, oldest_s)),
                next,
            } => tracing::warn!(
                target: "scangate::daemon::claimer",
                redis = %redis, lane, reason = %reason, waiting, oldest_s,
                "facility Redis still unavailable: {reason}. {waiting} scans wait in the outbox, the oldest captured {oldest_s} s ago; next attempt in {next:?}"
            ),
            Outage::Backlog {
                waiting: Err(e),
                next,
            } => tracing::warn!(
                target: "scangate::daemon::claimer",
                redis = %redis, lane, reason = %reason,
                "facility Redis still unavailable: {reason} (backlog unknown: {e}); next attempt in {next:?}"
            ),
        }
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

impl FacilityAnswers<'_> {
    /// Log it (INFO).
    pub fn emit(self) {
        tracing::info!(
            target: "scangate::daemon::claimer",
            redis = %self.redis, lane = self.lane, outage_s = self.outage.as_secs(),
            "facility Redis answers again; {}", self.doing
        );
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

impl CommittedPastRetention {
    /// Log it (WARN).
    pub fn emit(self) {
        let hours = self.retention.as_secs() / 3600;
        tracing::warn!(
            target: "scangate::gate",
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
/// its error (`gate::facility_time`).
pub struct FacilityClockStepped {
    /// How far (ms, signed: later is positive).
    pub step_ms: f64,
    /// `[dedup] window_ms`: a step beyond it can let two gateways' reads of
    /// one pick fall outside each other's window.
    pub window_ms: i64,
}

impl FacilityClockStepped {
    /// Log it: WARN from 5 % of the window on (a server's NTP slewing its
    /// clock quickly moves it by a few ms too: INFO).
    pub fn emit(self) {
        let step = self.step_ms;
        let window = self.window_ms;
        if step.abs() * 20.0 >= window as f64 {
            tracing::warn!(
                target: "scangate::gate",
                step_ms = step,
                window_ms = window,
                "the facility Redis's clock stepped by {step:.0} ms between two measurements (a failover to a server whose clock differs, or a step of the server's clock): scans read between them are claimed with that in their clock error, and until every gateway has measured the clock again their reads of one pick may be {step:.0} ms apart on facility time (the echo window is {window} ms). Keep the facility Redis and its replicas on NTP"
            );
        } else {
            tracing::info!(
                target: "scangate::gate",
                step_ms = step,
                window_ms = window,
                "the facility Redis's clock moved by {step:.0} ms between two measurements, more than drift explains (its NTP adjusting it?): scans read between them are claimed with that in their clock error"
            );
        }
    }
}

/// The facility Redis's clock was measured and this gateway's offset to
/// it changed enough to be told. (`scangate_facility_clock_offset_seconds`
/// is sampled from the measurement the claimer records.)
pub struct ClockMeasured<'a> {
    /// The Redis, as shown.
    pub redis: &'a str,
    /// The facility's clock minus this gateway's wall clock (ms).
    pub offset_ms: f64,
    /// Within ± this (ms).
    pub bound_ms: f64,
    /// An offset beyond this (ms) is a problem worth a WARN.
    pub worth_ms: f64,
    /// `[dedup] window_ms`, to say what `worth_ms` is a share of.
    pub window_ms: i64,
}

impl ClockMeasured<'_> {
    /// Log it: WARN when the wall clock is off by more than `worth_ms`
    /// (beyond the bound), else INFO.
    pub fn emit(self) {
        let (off, bound, worth) = (self.offset_ms, self.bound_ms, self.worth_ms);
        let side = if off < 0.0 { "ahead of" } else { "behind" };
        let how_far = format!(
            "{:.3} s {side} the facility Redis's (± {bound:.1} ms)",
            off.abs() / 1e3
        );
        if off.abs() - bound > worth {
            tracing::warn!(
                target: "scangate::daemon::claimer",
                redis = %self.redis, offset_ms = off, bound_ms = bound,
                "this gateway's wall clock is {how_far}, more than {worth:.0} ms ({:.0} % of the {} ms window). Claims are still compared on the facility's clock (each capture's boot-clock stamp mapped through these measurements), but the wall stamps this gateway writes into its audit trail are that far off. Fix: synchronise this gateway's clock (NTP, chrony) with the facility's",
                worth / self.window_ms as f64 * 100.0,
                self.window_ms
            );
        } else {
            tracing::info!(
                target: "scangate::daemon::claimer",
                redis = %self.redis, offset_ms = off, bound_ms = bound,
                "facility clock: this gateway's wall clock is {how_far}"
            );
        }
    }
}

/// Measuring the facility Redis's clock failed.
pub struct ClockMeasureFailed<'a> {
    /// The Redis, as shown.
    pub redis: &'a str,
    /// Why.
    pub error: &'a dyn std::fmt::Display,
}

impl ClockMeasureFailed<'_> {
    /// Log it (WARN).
    pub fn emit(self) {
        tracing::warn!(
            target: "scangate::daemon::claimer",
            redis = %self.redis,
            "measuring the facility Redis's clock failed: {}", self.error
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

impl LaneDbFailed<'_> {
    /// Log it (ERROR).
    pub fn emit(self) {
        let (lane, e, retry_in) = (self.lane, self.error, self.retry_in);
        match self.step {
            LaneDbStep::Reading => tracing::error!(
                target: "scangate::daemon::claimer",
                lane,
                "reading open scans failed on the local database: {e}; retrying in {retry_in:?}"
            ),
            LaneDbStep::Writing => tracing::error!(
                target: "scangate::daemon::claimer",
                lane,
                "writing verdicts failed on the local database: {e}; retrying in {retry_in:?}"
            ),
        }
    }
}

/// Scans began, or ceased, to wait for a close enough measurement of the
/// facility clock (the replay lane tells it).
pub struct ClockWaiting<'a> {
    /// The Redis, as shown.
    pub redis: &'a str,
    /// `replay`.
    pub lane: &'a str,
    /// How many wait now (0: none any more).
    pub waiting: usize,
    /// `[redis] max_clock_error_ms`.
    pub max_clock_error_ms: u64,
}

impl ClockWaiting<'_> {
    /// Log it: WARN when scans begin to wait, INFO when none does any more.
    pub fn emit(self) {
        let (redis, lane, now) = (self.redis, self.lane, self.waiting);
        if now > 0 {
            tracing::warn!(
                target: "scangate::daemon::claimer",
                redis = %redis, lane, waiting = now,
                "{now} scans wait: their capture times cannot be put on the facility clock within [redis] max_clock_error_ms = {} ms yet (no close enough measurement of it in their boot). They are claimed once the claimer has measured it closer (at every connect and every minute); `outbox status` shows the last measurement",
                self.max_clock_error_ms
            );
        } else {
            tracing::info!(
                target: "scangate::daemon::claimer",
                redis = %redis, lane,
                "no scan waits for the facility clock any more"
            );
        }
    }
}

/// Deciding scans failed on the local database; they stay durable.
pub struct DecidingFailed<'a> {
    /// What SQLite said.
    pub error: &'a dyn std::fmt::Display,
    /// What becomes of them.
    pub then: DecidingThen,
}

/// What becomes of scans whose decision failed ([`DecidingFailed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecidingThen {
    /// The batch is stored as pending (its decisions rolled back).
    StoredPending,
    /// Pending scans are decided again every so often.
    RetriedEvery(Duration),
}

impl DecidingFailed<'_> {
    /// Log it (ERROR).
    pub fn emit(self) {
        let e = self.error;
        match self.then {
            DecidingThen::StoredPending => tracing::error!(
                target: "scangate::outbox",
                "deciding failed; storing the scans as pending to retry: {e}"
            ),
            DecidingThen::RetriedEvery(every) => tracing::error!(
                target: "scangate::daemon",
                "deciding pending scans failed: {e}; they stay durable in the outbox and are retried every {every:?}"
            ),
        }
    }
}

/// A step of the raw-bytes sweeper's that failed; retried later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SweepStep {
    /// The page check after start could not run (retried every `every`).
    PageCheck {
        /// Until the next attempt.
        every: Duration,
    },
    /// Shrinking its page cache.
    ShrinkCache,
    /// Overwriting old raw bytes (retried at the next sweep, `every` on).
    ClearRaw {
        /// Until the next sweep.
        every: Duration,
    },
    /// Truncating the WAL after clearing.
    TruncateWal,
    /// Reading the ledger before removing decided outbox rows (retried at
    /// the next sweep, `every` on).
    ReadLedger {
        /// Until the next sweep.
        every: Duration,
    },
    /// Removing decided outbox rows (retried at the next sweep, `every`
    /// on; told without the `db` field).
    Prune {
        /// Until the next sweep.
        every: Duration,
    },
}

/// The raw-bytes sweeper could not do a step.
pub struct SweepFailed<'a> {
    /// The database.
    pub db: &'a std::path::Path,
    /// Which step.
    pub step: SweepStep,
    /// What SQLite said.
    pub error: &'a dyn std::fmt::Display,
}

impl SweepFailed<'_> {
    /// Log it: ERROR when the page check cannot run, else WARN.
    pub fn emit(self) {
        let (db, e) = (self.db.display(), self.error);
        match self.step {
            SweepStep::PageCheck { every } => tracing::error!(
                target: "scangate::daemon::sweeper",
                db = %db,
                "database integrity check could not run: {e}; raw scan bytes are not swept until it can, next attempt in {every:?}"
            ),
            SweepStep::ShrinkCache => tracing::warn!(
                target: "scangate::daemon::sweeper",
                db = %db,
                "raw-bytes sweeper: cannot shrink its page cache: {e}"
            ),
            SweepStep::ClearRaw { every } => tracing::warn!(
                target: "scangate::daemon::sweeper",
                db = %db,
                "clearing old raw scan bytes failed: {e}; they stay until the next sweep in {every:?}"
            ),
            SweepStep::TruncateWal => tracing::warn!(
                target: "scangate::daemon::sweeper",
                db = %db,
                "truncating the WAL after clearing raw scan bytes failed: {e}"
            ),
            SweepStep::ReadLedger { every } => tracing::warn!(
                target: "scangate::daemon::sweeper",
                db = %db,
                "removing decided outbox rows: cannot read the ledger: {e}; they stay until the next sweep in {every:?}"
            ),
            SweepStep::Prune { every } => tracing::warn!(
                target: "scangate::daemon::sweeper",
                "removing decided outbox rows failed: {e}; they stay until the next sweep in {every:?}"
            ),
        }
    }
}

/// What the raw-bytes sweeper did (INFO; a row holding the raw bytes back
/// WARN).
pub enum Swept<'a> {
    /// The page check after start passed.
    IntegrityPassed {
        /// The database.
        db: &'a std::path::Path,
    },
    /// Raw bytes of decided scans were overwritten.
    RawCleared {
        /// How many scans.
        cleared: u64,
        /// `[outbox] keep_raw_hours`.
        keep_raw_hours: u64,
        /// Whether the WAL was truncated after.
        wal_truncated: bool,
    },
    /// An undecided row keeps the raw bytes of it and every later scan.
    HeldBy {
        /// The row.
        seq: i64,
        /// Its state.
        state: &'a dyn std::fmt::Display,
        /// How long it has waited (hours).
        age_h: i64,
    },
    /// A WAL truncation owed since a sweep (readers were in the way) was
    /// done: the cleared bytes are gone from the WAL too.
    WalTruncated,
    /// Decided outbox rows older than the dedup horizon were removed.
    Pruned {
        /// How many.
        removed: u64,
        /// The horizon (hours).
        horizon_h: u64,
    },
}

impl Swept<'_> {
    /// Log it: INFO, a row holding the raw bytes back WARN.
    pub fn emit(self) {
        match self {
            Swept::IntegrityPassed { db } => tracing::info!(
                target: "scangate::daemon::sweeper",
                db = %db.display(),
                "database integrity check passed"
            ),
            Swept::RawCleared {
                cleared,
                keep_raw_hours,
                wal_truncated,
            } => tracing::info!(
                target: "scangate::daemon::sweeper",
                cleared,
                keep_raw_hours,
                wal_truncated,
                "overwrote the raw bytes of {cleared} scans decided more than {keep_raw_hours} h ago"
            ),
            Swept::WalTruncated => tracing::info!(
                target: "scangate::daemon::sweeper",
                wal_truncated = true,
                "the WAL was truncated: the raw bytes cleared by the last sweep are gone from it too"
            ),
            Swept::HeldBy { seq, state, age_h } => tracing::warn!(
                target: "scangate::daemon::sweeper",
                seq,
                state = %state,
                "outbox row {seq} has waited {age_h} h for a decision ({state}); the raw bytes of it and of every later scan are kept until it is decided (see `scangate outbox status`)"
            ),
            Swept::Pruned { removed, horizon_h } => tracing::info!(
                target: "scangate::daemon::sweeper",
                removed,
                "removed {removed} decided outbox rows older than the dedup horizon ({horizon_h} h); their audit records and ledger entries stay"
            ),
        }
    }
}

/// A passive WAL checkpoint failed (told once; the writer checkpoints by
/// itself).
pub struct CheckpointFailed<'a> {
    /// The database.
    pub db: &'a std::path::Path,
    /// What SQLite said.
    pub error: &'a dyn std::fmt::Display,
}

impl CheckpointFailed<'_> {
    /// Log it (WARN).
    pub fn emit(self) {
        tracing::warn!(
            target: "scangate::store::checkpoint",
            db = %self.db.display(),
            "WAL checkpoint failed: {}; the writer checkpoints by itself", self.error
        );
    }
}

/// Publishing the metrics or the status file failed, or works again
/// (told once per change of what fails).
pub struct PublishFailed<'a> {
    /// What fails (`None`: publishing works again).
    pub errors: Option<&'a str>,
}

impl PublishFailed<'_> {
    /// Log it: WARN, or INFO when it works again.
    pub fn emit(self) {
        match self.errors {
            Some(e) => tracing::warn!(target: "scangate::metrics", "metrics/status: {e}; retrying"),
            None => tracing::info!(target: "scangate::metrics", "metrics/status: published again"),
        }
    }
}

/// The daemon starts: its state, identity and scanners.
pub struct Starting<'a> {
    /// The database.
    pub db: &'a std::path::Path,
    /// `[gateway] facility`.
    pub facility: &'a str,
    /// `[gateway] id`.
    pub gateway: &'a str,
    /// How many scanners are configured.
    pub scanners: usize,
    /// `[dedup] window_ms`.
    pub window_ms: u64,
    /// Whether a facility Redis decides (else the embedded gate).
    pub facility_redis: bool,
}

impl Starting<'_> {
    /// Log it (INFO).
    pub fn emit(self) {
        tracing::info!(
            target: "scangate::daemon",
            db = %self.db.display(), facility = %self.facility, gateway = %self.gateway,
            scanners = self.scanners, window_ms = self.window_ms,
            store = if self.facility_redis { "facility redis" } else { "embedded" },
            "scangate starting"
        );
    }
}

/// What the configuration the daemon starts with leaves undone (WARN).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartWarning {
    /// Scans wait for a facility store that is no longer configured.
    NoFacilityStore {
        /// How many.
        waiting: i64,
    },
    /// No scanner is configured.
    NoScanners,
}

impl StartWarning {
    /// Log it (WARN).
    pub fn emit(self) {
        match self {
            StartWarning::NoFacilityStore { waiting } => tracing::warn!(
                target: "scangate::daemon",
                scans = waiting,
                "{waiting} scans wait for a facility store that is not configured ([redis]): they stay undecided. Fix: restore the [redis] section, or, if the facility store is gone for good, stop scangate and run `scangate outbox decide-locally`"
            ),
            StartWarning::NoScanners => tracing::warn!(
                target: "scangate::daemon",
                "no [[scanner]] is configured: nothing will be read. Fix: add a [[scanner]] section for each scanner (`scangate devices` lists what is attached) and restart"
            ),
        }
    }
}

/// Where the daemon's life stands (INFO): ready, stopping, stopped.
pub enum Lifecycle<'a> {
    /// Every scanner is up (or the setup time is over): systemd is told.
    Ready {
        /// The status line.
        status: &'a str,
    },
    /// Asked to stop.
    Stopping,
    /// Draining takes long: the stop timeout is extended.
    StopExtended {
        /// The status line (`stopping: draining for N s`).
        line: &'a str,
        /// By how much.
        by: Duration,
    },
    /// Stopped, with what was decided.
    Stopped {
        /// The counts.
        stats: &'a crate::model::GateStats,
    },
}

impl Lifecycle<'_> {
    /// Log it (INFO).
    pub fn emit(self) {
        match self {
            Lifecycle::Ready { status } => {
                tracing::info!(target: "scangate::daemon", status = %status, "ready")
            }
            Lifecycle::Stopping => tracing::info!(
                target: "scangate::daemon",
                "stopping: closing scanners, draining the outbox"
            ),
            Lifecycle::StopExtended { line, by } => tracing::info!(
                target: "scangate::daemon",
                "{line}; the stop timeout is extended by {by:?}"
            ),
            Lifecycle::Stopped { stats } => tracing::info!(
                target: "scangate::daemon",
                committed = stats.committed,
                suppressed = stats.suppressed,
                rejected = stats.rejected,
                exact_lookups = stats.exact_lookups,
                lookups_saved_by_bloom = stats.lookups_saved,
                "scangate stopped"
            ),
        }
    }
}

/// How a stage of the daemon ended when it should not have (ERROR, the
/// anchor thread's panic a WARN).
pub enum StageFailed<'a> {
    /// A stage panicked (`the {stage} {why}`).
    Panicked {
        /// The stage, as told.
        stage: &'a dyn std::fmt::Display,
        /// `panicked: …`.
        why: &'a str,
    },
    /// A scanner's task panicked while a reload stopped it.
    ScannerPanickedOnReload {
        /// The scanner.
        scanner: &'a str,
        /// `panicked: …`.
        why: &'a str,
    },
    /// The database failed its integrity check.
    Corrupt {
        /// The database.
        db: &'a std::path::Path,
        /// What the check found.
        detail: &'a str,
        /// Whether the daemon stops for it (else it was found stopping).
        stopping: bool,
    },
    /// A scanner's task ended (it should run until shutdown).
    ScannerEnded {
        /// How.
        detail: &'a str,
    },
    /// The outbox writer stopped.
    WriterStopped,
    /// The facility claimer stopped.
    ClaimerStopped,
    /// The outbox writer found the facility claimer gone.
    ClaimerGone,
    /// The raw-bytes sweeper stopped.
    SweeperStopped {
        /// How.
        why: &'a str,
    },
    /// The anchor thread panicked (WARN).
    AnchorThreadPanicked,
    /// A metrics/status publisher task failed.
    PublisherFailed {
        /// How.
        error: &'a dyn std::fmt::Display,
    },
}

impl StageFailed<'_> {
    /// Log it: ERROR, the anchor thread's panic WARN.
    pub fn emit(self) {
        match self {
            StageFailed::Panicked { stage, why } => {
                tracing::error!(target: "scangate::daemon", "the {stage} {why}")
            }
            StageFailed::ScannerPanickedOnReload { scanner, why } => tracing::error!(
                target: "scangate::daemon",
                scanner = %scanner,
                "the scanner's task {why} while a reload stopped it"
            ),
            StageFailed::Corrupt {
                db,
                detail,
                stopping: false,
            } => tracing::error!(
                target: "scangate::daemon",
                db = %db.display(),
                "the database failed its integrity check: {detail}"
            ),
            StageFailed::Corrupt {
                db,
                detail,
                stopping: true,
            } => tracing::error!(
                target: "scangate::daemon",
                db = %db.display(),
                "the database failed its integrity check: {detail}; stopping"
            ),
            StageFailed::ScannerEnded { detail } => tracing::error!(
                target: "scangate::daemon",
                "a scanner task ended unexpectedly ({detail}); stopping"
            ),
            StageFailed::WriterStopped => tracing::error!(
                target: "scangate::daemon",
                "the outbox writer stopped unexpectedly; closing scanners"
            ),
            StageFailed::ClaimerStopped => tracing::error!(
                target: "scangate::daemon",
                "the facility claimer stopped unexpectedly; stopping"
            ),
            StageFailed::ClaimerGone => tracing::error!(
                target: "scangate::daemon",
                "the facility claimer is gone; stopping"
            ),
            StageFailed::SweeperStopped { why } => tracing::error!(
                target: "scangate::daemon",
                "the raw-bytes sweeper stopped unexpectedly ({why}); stopping"
            ),
            StageFailed::AnchorThreadPanicked => tracing::warn!(
                target: "scangate::daemon",
                "the anchor thread panicked; the chain head was not anchored at stop"
            ),
            StageFailed::PublisherFailed { error } => tracing::error!(
                target: "scangate::daemon",
                "the metrics/status publisher failed: {error}"
            ),
        }
    }
}

/// The outbox takes writes again after [`OutboxWriteFailed`].
pub struct OutboxWritesAgain<'a> {
    /// The database.
    pub db: &'a std::path::Path,
    /// How many scans the batch holds.
    pub scans: usize,
}

impl OutboxWritesAgain<'_> {
    /// Log it (INFO).
    pub fn emit(self) {
        tracing::info!(
            target: "scangate::daemon",
            db = %self.db.display(), scans = self.scans,
            "the outbox takes writes again: the waiting scans are stored and acknowledged"
        );
    }
}

/// A reload (SIGHUP) was applied (INFO, target `scangate::reload`): the
/// scanners as reloaded are set in `Telemetry` (`scangate_scanner_up`).
pub struct Reloaded<'a> {
    /// Scanners added.
    pub added: usize,
    /// Removed.
    pub removed: usize,
    /// Changed.
    pub changed: usize,
    /// The plan, as told.
    pub described: &'a str,
    /// The scanners now configured.
    pub scanners: &'a [String],
}

impl Reloaded<'_> {
    /// Log it (INFO) and set the scanners.
    pub fn emit(self, telemetry: &Telemetry) {
        let (added, removed, changed) = (self.added, self.removed, self.changed);
        tracing::info!(
            target: "scangate::reload",
            added, removed, changed,
            "configuration reloaded: {}", self.described
        );
        telemetry.set_scanners(self.scanners);
    }
}

/// A reload (SIGHUP) was refused or failed (target `scangate::reload`);
/// the daemon runs on with the configuration it had.
pub enum ReloadRefused<'a> {
    /// Keys changed that need a restart (WARN).
    NeedsRestart {
        /// The keys.
        keys: &'a [String],
    },
    /// The file does not parse (ERROR).
    ConfigError {
        /// ` (line N)` or empty.
        at: &'a str,
        /// Why.
        error: &'a dyn std::fmt::Display,
        /// How many scanners the running configuration has.
        scanners: usize,
    },
    /// Reading the file did not finish (ERROR).
    ReadFailed {
        /// The file, as shown.
        shown: &'a str,
        /// Why.
        error: &'a dyn std::fmt::Display,
    },
}

impl ReloadRefused<'_> {
    /// Log it: WARN when a restart is needed, else ERROR.
    pub fn emit(self) {
        match self {
            ReloadRefused::NeedsRestart { keys } => tracing::warn!(
                target: "scangate::reload",
                keys = %keys.join(", "),
                "reload refused: {} changed, which needs a restart (`systemctl restart scangate`); still running with the configuration it started with (scanners as last reloaded)",
                keys.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
            ),
            ReloadRefused::ConfigError {
                at,
                error,
                scanners,
            } => tracing::error!(
                target: "scangate::reload",
                "reload refused: configuration error{at}: {error}. Still running with the configuration read before ({scanners} scanner(s)); fix the file and reload again (`scangate check-config` shows the problem)"
            ),
            ReloadRefused::ReadFailed { shown, error } => tracing::error!(
                target: "scangate::reload",
                "reload failed: reading {shown} did not finish ({error}); still running with the configuration read before"
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

impl FacilityConnected<'_> {
    /// Log it (INFO).
    pub fn emit(self) {
        let (info, lane) = (self.info, self.lane);
        tracing::info!(
            target: "scangate::daemon::claimer",
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

impl FacilityWarning<'_> {
    /// Log it (WARN).
    pub fn emit(self) {
        match self {
            FacilityWarning::ReadOnlyReplica { redis } => tracing::warn!(
                target: "scangate::daemon::claimer",
                redis = %redis,
                "facility Redis is a read-only replica of another server: it refuses claims, so scans wait in the outbox until it is promoted. Point [redis] url at the primary"
            ),
            FacilityWarning::AppendOnlyOff { redis } => tracing::warn!(
                target: "scangate::daemon::claimer",
                redis = %redis,
                "facility Redis has appendonly off: a Redis crash can lose recent claims; this gateway still suppresses echoes of its own commits"
            ),
            FacilityWarning::ScannerClone {
                redis,
                scanner,
                gateway,
                other_gateway,
            } => tracing::warn!(
                target: "scangate::daemon::claimer",
                redis = %redis, scanner = %scanner, other_gateway = %other_gateway,
                "scanner {scanner:?} of this gateway ({gateway}) has the name of a scanner of gateway {other_gateway:?} (a cloned config?). Each counts its own reads; name them apart so the ledger tells them apart. Fix: rename one, or, if it is one scanner heard by both gateways, set shared = true in its [[scanner]] on both"
            ),
            FacilityWarning::ScannersNotRecorded { redis, error } => tracing::warn!(
                target: "scangate::daemon::claimer",
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

impl Confirmation<'_> {
    /// Log it: WARN when replicas are not waited for or left, else INFO.
    pub fn emit(self) {
        match self {
            Confirmation::Unwaited {
                redis,
                lane,
                connected,
            } => tracing::warn!(
                target: "scangate::daemon::claimer",
                redis = %redis, lane, replicas = connected,
                "{connected} replicas are connected to the facility Redis, but min_replicas_ack = 0: claims count as decided before any replica has them, so a failover can lose committed picks from the facility ledger. Fix: remove min_replicas_ack (default \"auto\": every connected replica)"
            ),
            Confirmation::PrimaryOnly { redis, lane, disk } => tracing::info!(
                target: "scangate::daemon::claimer",
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
                target: "scangate::daemon::claimer",
                redis = %redis, lane, replicas = connected, wanted,
                "claims count as decided once {wanted} of {connected} connected replicas confirmed them (WAIT){disk}; until then the scans wait as unresolved"
            ),
            Confirmation::ReplicasLeft {
                redis,
                lane,
                now,
                before,
            } => tracing::warn!(
                target: "scangate::daemon::claimer",
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

impl RecordingFailed<'_> {
    /// Log it (WARN).
    pub fn emit(self) {
        let e = self.error;
        match self.what {
            Recording::FacilityState => tracing::warn!(
                target: "scangate::daemon::claimer",
                "recording the facility store's state for `outbox status` failed: {e}"
            ),
            Recording::FirstClockSample => tracing::warn!(
                target: "scangate::daemon::claimer::lane",
                "recording the facility clock sample failed: {e}"
            ),
            Recording::ClockSample => tracing::warn!(
                target: "scangate::daemon::claimer::lane",
                "recording the facility clock sample failed: {e}; captures are mapped through the earlier ones"
            ),
            Recording::FacilityClock => tracing::warn!(
                target: "scangate::daemon::claimer::lane",
                "recording the facility clock for `outbox status` failed: {e}"
            ),
            Recording::ScannerClones => tracing::warn!(
                target: "scangate::daemon::claimer::lane",
                "recording the scanner clones for `outbox status` failed: {e}"
            ),
            Recording::LedgerStream => tracing::warn!(
                target: "scangate::daemon::claimer::lane",
                "recording the facility ledger stream for `status` failed: {e}"
            ),
            Recording::WaitingForClock => tracing::warn!(
                target: "scangate::daemon::claimer::lane",
                "recording the scans waiting for the clock for `outbox status` failed: {e}"
            ),
        }
    }
}

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

impl LedgerTrim<'_> {
    /// Log it: WARN when it failed or nobody reads the stream, else INFO.
    pub fn emit(self) {
        match self {
            LedgerTrim::Failed {
                redis,
                stream,
                error,
                every,
            } => tracing::warn!(
                target: "scangate::daemon::claimer::lane",
                redis = %redis,
                "trimming the facility ledger stream {stream} failed: {error}; tried again in {every:?}"
            ),
            LedgerTrim::NoGroup {
                redis,
                stream,
                entries,
            } => tracing::warn!(
                target: "scangate::daemon::claimer::lane",
                redis = %redis, stream = %stream, entries,
                "no consumer group reads the facility ledger stream {stream}: it is never trimmed, and the facility Redis's memory grows with every pick ({entries} entries) until it refuses claims. Fix: have the inventory system read it with a consumer group, e.g. `scangate ledger export --follow --group inventory` (docs/design.md, \"Ledger consumers and trimming\")"
            ),
            LedgerTrim::GroupReads { redis, groups } => tracing::info!(
                target: "scangate::daemon::claimer::lane",
                redis = %redis, groups,
                "a consumer group reads the facility ledger stream now: acknowledged entries are trimmed"
            ),
            LedgerTrim::Trimmed {
                redis,
                trimmed,
                entries,
            } => tracing::info!(
                target: "scangate::daemon::claimer::lane",
                redis = %redis, trimmed, entries,
                "trimmed {trimmed} entries every consumer group had acknowledged from the facility ledger stream; {entries} left"
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

impl FacilityRefuses<'_> {
    /// Log it (ERROR).
    pub fn emit(self) {
        let reason = self.reason;
        tracing::error!(
            target: "scangate::daemon::claimer::lane",
            redis = %self.redis, lane = self.lane,
            "facility Redis refuses this gateway: {reason}. Scans are kept in the outbox as unresolved (`scangate status` shows the gateway degraded), and claimed in capture order once it lets this gateway in again"
        );
    }
}

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

impl Reconcile<'_> {
    /// Log it (WARN).
    pub fn emit(self) {
        match self {
            Reconcile::Begins {
                redis,
                lane,
                lost,
                hours,
            } => tracing::warn!(
                target: "scangate::daemon::claimer::lane",
                redis = %redis, lane, lost,
                "facility Redis {redis} has lost data: this gateway's commit {lost} is not there (emptied or replaced, a lagging replica promoted, or an older backup restored). Re-publishing this gateway's commits of the last {hours} h before claiming new scans"
            ),
            Reconcile::Done { redis, lane, done } => tracing::warn!(
                target: "scangate::daemon::claimer::lane",
                redis = %redis, lane, republished = done.republished, conflicts = done.conflicts, took_ms = done.took_ms,
                "reconciled with facility Redis {redis}: re-published {} commits of this gateway in {} ms (each keeps its scan UUID: ledger consumers dedup by it); {} conflict(s){}. New scans are claimed again",
                done.republished, done.took_ms, done.conflicts,
                if done.conflicts > 0 { ": picks another gateway committed too while the store had lost data (see `scangate outbox status`)" } else { "" }
            ),
            Reconcile::Failed { redis, lane, error } => tracing::warn!(
                target: "scangate::daemon::claimer::lane",
                redis = %redis, lane,
                "reconciling with facility Redis {redis} failed: {error}. No new scan is claimed until it succeeds; it is tried again at the next claim"
            ),
            Reconcile::NotInOutbox { scan } => tracing::warn!(
                target: "scangate::daemon::claimer::reconcile",
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
                    target: "scangate::daemon::claimer::reconcile",
                    scan = %scan, other_scan = %other_scan, other_gateway = other_gateway.unwrap_or("unknown"),
                    "conflict: this gateway's committed scan {scan} and {by}'s scan {other_scan} were both committed as picks of one label while the facility store had lost data; the facility ledger keeps one entry, but both gateways' ledgers have theirs. Check which is right and correct the ledger by hand (`scangate audit trace {scan}`)"
                );
            }
            Reconcile::ConflictsNoticed { redis, conflicts } => tracing::warn!(
                target: "scangate::daemon::claimer::lane",
                redis = %redis, conflicts,
                "another gateway's reconciliation found {conflicts} conflict(s) with this gateway's commits (see above, `scangate outbox status` and `scangate audit trace <scan>`)"
            ),
            Reconcile::NoticesUnreadable {
                redis,
                error,
                every,
            } => tracing::warn!(
                target: "scangate::daemon::claimer::lane",
                redis = %redis,
                "reading the facility's conflicts stream failed: {error}; read again in {every:?}"
            ),
        }
    }
}

/// Over which time an ACK latency summary runs ([`AckLatency`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckSpan {
    /// The last report interval.
    Last(Duration),
    /// Since start (told when the scanner's task ends).
    SinceStart,
}

/// A serial scanner's ACK latency summary (INFO, target
/// `scangate::ack_latency`; the histogram is `scangate_ack_latency_seconds`,
/// observed by [`Acked`]).
pub struct AckLatency<'a> {
    /// The scanner's name.
    pub scanner: &'a str,
    /// NAKs written in the span.
    pub naks: u64,
    /// The span.
    pub span: AckSpan,
    /// The latency summary.
    pub summary: &'a dyn std::fmt::Display,
}

impl AckLatency<'_> {
    /// Log it (INFO).
    pub fn emit(self) {
        let (scanner, naks, summary) = (self.scanner, self.naks, self.summary);
        match self.span {
            AckSpan::Last(every) => tracing::info!(
                target: "scangate::ack_latency",
                scanner, naks,
                "ACK latency (frame end read -> ACK written), last {}s: {summary}",
                every.as_secs()
            ),
            AckSpan::SinceStart => tracing::info!(
                target: "scangate::ack_latency",
                scanner = %scanner, naks,
                "ACK latency (frame end read -> ACK written) since start: {summary}"
            ),
        }
    }
}

/// A scanner's device could not be opened or written, or its reader not
/// started.
pub enum SourceFailed<'a> {
    /// A serial device did not open (WARN; told once per reason).
    SerialOpen {
        /// The scanner's name.
        scanner: &'a str,
        /// The device path.
        device: &'a str,
        /// Why.
        error: &'a str,
        /// The back-off's longest wait.
        every: Duration,
    },
    /// Writing a NAK failed (WARN).
    Nak {
        /// The scanner's name.
        scanner: &'a str,
        /// Why.
        error: &'a dyn std::fmt::Display,
    },
    /// A HID device did not open (WARN; told once per reason).
    HidOpen {
        /// The scanner's name.
        scanner: &'a str,
        /// `pos` or `keyboard`.
        mode: &'a str,
        /// Why.
        error: &'a dyn std::fmt::Display,
        /// What is done about it.
        hint: &'a str,
        /// The back-off's longest wait.
        every: Duration,
    },
    /// The HID reader thread did not start (ERROR).
    HidThread {
        /// The scanner's name.
        scanner: &'a str,
        /// Why.
        error: &'a dyn std::fmt::Display,
    },
}

impl SourceFailed<'_> {
    /// Log it: ERROR when the HID reader did not start, else WARN.
    pub fn emit(self) {
        match self {
            SourceFailed::SerialOpen {
                scanner,
                device,
                error,
                every,
            } => tracing::warn!(
                target: "scangate::source::serial",
                scanner = %scanner, device = %device,
                "cannot open scanner: {error}; retrying every {}s at most, and as soon as the device \
                 appears. Check the cable, the udev rule for /dev/scangate/{scanner} and the service \
                 user's access (dialout group)",
                every.as_secs()
            ),
            SourceFailed::Nak { scanner, error } => tracing::warn!(
                target: "scangate::source::serial",
                scanner = %scanner,
                "writing NAK failed: {error}"
            ),
            SourceFailed::HidOpen {
                scanner,
                mode,
                error,
                hint,
                every,
            } => tracing::warn!(
                target: "scangate::source::hid",
                scanner = %scanner, mode,
                "cannot open HID scanner: {error}; {hint} (checked every {}s at most)",
                every.as_secs()
            ),
            SourceFailed::HidThread { scanner, error } => tracing::error!(
                target: "scangate::source::hid",
                scanner = %scanner,
                "cannot start the HID reader thread: {error}"
            ),
        }
    }
}

/// A keyboard-wedge scanner's evdev nodes grabbed, or not (target
/// `scangate::source::hid::device`).
pub enum HidGrab<'a> {
    /// No evdev node was found to grab (ERROR).
    NoNode {
        /// The scanner's name.
        scanner: &'a str,
        /// The hidraw device.
        device: &'a std::path::Path,
        /// Its name under /sys/class/hidraw.
        name: &'a str,
    },
    /// A node could not be grabbed (ERROR).
    Failed {
        /// The scanner's name.
        scanner: &'a str,
        /// The node.
        node: &'a std::path::Path,
        /// Why.
        why: &'a dyn std::fmt::Display,
    },
    /// These nodes are grabbed (INFO).
    Grabbed {
        /// The scanner's name.
        scanner: &'a str,
        /// The nodes.
        nodes: &'a [&'a std::path::Path],
    },
}

impl HidGrab<'_> {
    /// Log it: ERROR when a node is not grabbed, else INFO.
    pub fn emit(self) {
        match self {
            HidGrab::NoNode {
                scanner,
                device,
                name,
            } => tracing::error!(
                target: "scangate::source::hid::device",
                scanner, device = %device.display(),
                "SECURITY: found no evdev node of this keyboard-wedge scanner to grab; if the kernel \
                 created one, every scan is also typed into the console / login prompt. Check /sys/class/hidraw/{name}"
            ),
            HidGrab::Failed { scanner, node, why } => tracing::error!(
                target: "scangate::source::hid::device",
                scanner, node = %node.display(),
                "SECURITY: cannot grab (EVIOCGRAB) {}: {why}; this scanner's keystrokes also reach the \
                 console, login prompt or desktop. Give the service user read access to the event node \
                 (udev rule) and make sure no other program grabs it. Scanning continues.",
                node.display()
            ),
            HidGrab::Grabbed { scanner, nodes } => tracing::info!(
                target: "scangate::source::hid::device",
                scanner, nodes = ?nodes,
                "keyboard-wedge scanner grabbed: its keystrokes go only to scangate"
            ),
        }
    }
}

/// A stage that has work made no progress within its bound, or makes
/// progress again (the watchdog's view, target `scangate::notify`).
pub enum Wedge<'a> {
    /// No progress for `bound`: the watchdog pings stop (ERROR).
    Stuck {
        /// The stage.
        stage: &'a str,
        /// Its bound.
        bound: Duration,
    },
    /// It makes progress again (INFO).
    Moves {
        /// The stage.
        stage: &'a str,
    },
}

impl Wedge<'_> {
    /// Log it: ERROR when stuck, INFO when it moves again.
    pub fn emit(self) {
        match self {
            Wedge::Stuck { stage, bound } => tracing::error!(
                target: "scangate::notify",
                stage,
                "the {stage} has made no progress for {bound:?} while it has work: the watchdog pings stop, so systemd restarts scangate (scans are safe in the outbox)"
            ),
            Wedge::Moves { stage } => tracing::info!(
                target: "scangate::notify",
                stage,
                "the {stage} makes progress again; watchdog pings resume"
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

impl LedgerFollow<'_> {
    /// Log it: INFO when the group is created, WARN when following failed
    /// or entries were claimed from another consumer.
    pub fn emit(self) {
        match self {
            LedgerFollow::Claimed {
                group,
                consumer,
                entries,
                idle,
            } => tracing::warn!(
                target: "scangate::facility::stream",
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
                target: "scangate::facility::stream",
                group,
                consumer,
                "consumer {consumer:?} of group {group:?} cannot claim what other consumers left unacknowledged: {error}; it follows the stream without (grant the ACL user +xautoclaim, Redis 6.2 or later; or pass --claim-idle-secs 0)"
            ),
            LedgerFollow::GroupCreated { stream, group } => tracing::info!(
                target: "scangate::facility::stream",
                stream = %stream, group,
                "consumer group created on the facility ledger stream, reading from its first entry"
            ),
            LedgerFollow::Failed {
                group,
                consumer,
                error,
                wait,
            } => tracing::warn!(
                target: "scangate::facility::stream",
                group,
                consumer,
                "following the facility ledger stream as consumer {consumer:?} of group {group:?} failed: {error}; reconnecting in {wait:?} (entries printed and not acknowledged are printed again)"
            ),
        }
    }
}

/// A database older than state identities takes its state directory's
/// (WARN, target `scangate::store`).
pub struct StateIdentityAdopted<'a> {
    /// The database.
    pub db: &'a std::path::Path,
    /// The identity it takes.
    pub state_id: &'a str,
}

impl StateIdentityAdopted<'_> {
    /// Log it (WARN).
    pub fn emit(self) {
        tracing::warn!(
            target: "scangate::store",
            db = %self.db.display(), state_id = %self.state_id,
            "the database has no state identity (written before identities): it takes this state directory's"
        );
    }
}

/// The state directory's disk space runs short of `[outbox]
/// warn_days_left`, or lasts again (target `scangate::metrics`; the gauges
/// are sampled with it).
pub enum DiskSpace<'a> {
    /// It runs short (WARN): what the sampler says.
    Short {
        /// The warning.
        warning: &'a dyn std::fmt::Display,
    },
    /// It lasts longer than `warn_days_left` again (INFO).
    Lasts,
}

impl DiskSpace<'_> {
    /// Log it: WARN when short, INFO when it lasts again.
    pub fn emit(self) {
        match self {
            DiskSpace::Short { warning } => {
                tracing::warn!(target: "scangate::metrics", "disk space: {warning}")
            }
            DiskSpace::Lasts => tracing::info!(
                target: "scangate::metrics",
                "disk space: the state directory lasts longer than [outbox] warn_days_left again"
            ),
        }
    }
}

/// Where serving the metrics failed ([`MetricsFailed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricsStep {
    /// Sampling the database for the metrics and the status file (ERROR,
    /// target `scangate::metrics`).
    Sampling,
    /// Accepting a connection on `[metrics] listen` (WARN, target
    /// `scangate::metrics::http`).
    Accept,
}

/// Sampling or serving the metrics failed (retried).
pub struct MetricsFailed<'a> {
    /// Where.
    pub step: MetricsStep,
    /// Why.
    pub error: &'a dyn std::fmt::Display,
}

impl MetricsFailed<'_> {
    /// Log it: ERROR when sampling failed, WARN when accepting did.
    pub fn emit(self) {
        let e = self.error;
        match self.step {
            MetricsStep::Sampling => {
                tracing::error!(target: "scangate::metrics", "metrics/status sampling failed: {e}")
            }
            MetricsStep::Accept => tracing::warn!(
                target: "scangate::metrics::http",
                "[metrics] listen: accept failed: {e}"
            ),
        }
    }
}

/// An audit record could not be parsed and is left out of what was read
/// (WARN, target `scangate::audit`).
pub struct AuditRecordUnreadable<'a> {
    /// Its position.
    pub seq: i64,
    /// Why.
    pub error: &'a dyn std::fmt::Display,
}

impl AuditRecordUnreadable<'_> {
    /// Log it (WARN).
    pub fn emit(self) {
        tracing::warn!(
            target: "scangate::audit",
            "audit record {} is unreadable ({}) and left out; run `scangate audit verify`",
            self.seq, self.error
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::model::ScanState;
    use std::sync::{Arc, Mutex};
    use tracing::field::{Field, Visit};

    /// One captured log event: level, target, fields (`message` too).
    #[derive(Debug, Clone)]
    struct Logged {
        level: tracing::Level,
        target: String,
        fields: Vec<(String, String)>,
    }

    impl Logged {
        fn field(&self, name: &str) -> Option<&str> {
            self.fields
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        }
    }

    struct Capture(Arc<Mutex<Vec<Logged>>>);

    struct Fields<'a>(&'a mut Vec<(String, String)>);

    impl Visit for Fields<'_> {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0
                .push((field.name().to_string(), format!("{value:?}")));
        }
        fn record_str(&mut self, field: &Field, value: &str) {
            self.0.push((field.name().to_string(), value.to_string()));
        }
    }

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            let mut fields = Vec::new();
            event.record(&mut Fields(&mut fields));
            self.0.lock().unwrap().push(Logged {
                level: *event.metadata().level(),
                target: event.metadata().target().to_string(),
                fields,
            });
        }
    }

    /// What `f` logged (every level).
    fn logged(f: impl FnOnce()) -> Vec<Logged> {
        use tracing_subscriber::prelude::*;
        let got = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry().with(Capture(got.clone()));
        tracing::subscriber::with_default(subscriber, f);
        got.lock().unwrap().clone()
    }

    fn telemetry() -> Telemetry {
        let cfg = Config::parse(
            "[[scanner]]\nname = \"counter-1\"\nkind = \"serial\"\npath = \"/dev/null\"\nscan_type = \"dispense\"\n",
            None,
        )
        .unwrap();
        Telemetry::new(&cfg)
    }

    /// The value of the series line starting `prefix` (labels included).
    fn value(t: &Telemetry, prefix: &str) -> Option<f64> {
        t.encode()
            .lines()
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    }

    fn one(logs: &[Logged]) -> &Logged {
        assert_eq!(logs.len(), 1, "{logs:?}");
        &logs[0]
    }

    const UP: &str = "scangate_scanner_up{scanner=\"counter-1\"}";

    #[test]
    fn scanner_events_log_once_and_move_scanner_up() {
        let t = telemetry();
        let logs = logged(|| {
            SerialConnected {
                scanner: "counter-1",
                device: "/dev/ttyUSB0",
                baud: 9600,
                line: "8N1".into(),
                framing: "CR LF".into(),
                ack: true,
            }
            .emit(&t)
        });
        let l = one(&logs);
        assert_eq!(
            (l.level, l.field("message"), l.field("scanner")),
            (
                tracing::Level::INFO,
                Some("scanner connected"),
                Some("counter-1")
            )
        );
        assert_eq!(l.target, "scangate::source::serial");
        assert_eq!(value(&t, UP), Some(1.0));
        assert!(t.live().scanners[0].connected);

        let logs = logged(|| {
            SerialLost {
                scanner: "counter-1",
                device: "/dev/ttyUSB0",
                reason: "unplugged",
                partial_bytes: 0,
            }
            .emit(&t)
        });
        let l = one(&logs);
        assert_eq!(
            (l.level, l.field("reason")),
            (tracing::Level::WARN, Some("unplugged"))
        );
        assert_eq!(value(&t, UP), Some(0.0));

        logged(|| {
            HidConnected {
                scanner: "counter-1",
                mode: "pos",
                device: "hidraw0",
            }
            .emit(&t)
        });
        assert_eq!(value(&t, UP), Some(1.0));
        let logs = logged(|| {
            HidLost {
                scanner: "counter-1",
                reason: "gone",
            }
            .emit(&t)
        });
        assert_eq!(one(&logs).level, tracing::Level::WARN);
        assert_eq!(value(&t, UP), Some(0.0));

        logged(|| {
            HidConnected {
                scanner: "counter-1",
                mode: "pos",
                device: "hidraw0",
            }
            .emit(&t)
        });
        let logs = logged(|| {
            ScannerClosed {
                scanner: "counter-1",
            }
            .emit(&t)
        });
        assert_eq!(one(&logs).level, tracing::Level::DEBUG);
        assert_eq!(value(&t, UP), Some(0.0));
    }

    #[test]
    fn a_partial_frame_lost_is_one_more_warning() {
        let t = telemetry();
        let logs = logged(|| {
            SerialLost {
                scanner: "counter-1",
                device: "/dev/ttyUSB0",
                reason: "unplugged",
                partial_bytes: 7,
            }
            .emit(&t)
        });
        assert_eq!(logs.len(), 2, "{logs:?}");
        assert_eq!(logs[0].field("bytes"), Some("7"));
    }

    #[test]
    fn reads_and_acks_are_counted_and_logged_once() {
        let t = telemetry();
        let logs = logged(|| {
            ScanRead {
                scanner: "counter-1",
            }
            .emit(&t)
        });
        assert_eq!(one(&logs).level, tracing::Level::TRACE);
        assert_eq!(
            value(&t, "scangate_scans_read_total{scanner=\"counter-1\"}"),
            Some(1.0)
        );
        let logs = logged(|| {
            Acked {
                scanner: "counter-1",
                took: Duration::from_millis(3),
            }
            .emit(&t)
        });
        one(&logs);
        assert_eq!(value(&t, "scangate_ack_latency_seconds_count"), Some(1.0));
    }

    #[test]
    fn each_decision_is_logged_once_and_counted_a_reject_at_warn_with_its_reason() {
        let t = telemetry();
        let d = |verdict: Verdict| Decision {
            scan_uuid: "u-1".into(),
            verdict,
            content_key: None,
            scanner: "counter-1".into(),
            read_boot_ns: Some(crate::capture::clock::boot_ns()),
            was: ScanState::Pending,
        };
        let decisions = [
            d(Verdict::Committed),
            d(Verdict::Rejected {
                reason: "bad check digit".into(),
            }),
        ];
        let logs = logged(|| {
            Decided {
                decisions: &decisions,
            }
            .emit(&t)
        });
        assert_eq!(logs.len(), 2, "{logs:?}");
        assert_eq!(
            (logs[0].level, logs[0].field("decision")),
            (tracing::Level::DEBUG, Some("committed"))
        );
        let r = &logs[1];
        assert_eq!(
            (
                r.level,
                r.field("decision"),
                r.field("reason"),
                r.field("scan_uuid"),
                r.field("scanner")
            ),
            (
                tracing::Level::WARN,
                Some("rejected"),
                Some("bad check digit"),
                Some("u-1"),
                Some("counter-1")
            )
        );
        assert!(r.field("message").unwrap().contains("bad check digit"));
        assert_eq!(r.target, REJECT_TARGET);
        for (decision, n) in [("committed", 1.0), ("rejected", 1.0), ("suppressed", 0.0)] {
            let series = format!(
                "scangate_decisions_total{{scanner=\"counter-1\",decision=\"{decision}\"}}"
            );
            assert_eq!(value(&t, &series), Some(n), "{decision}");
        }
        assert_eq!(
            value(&t, "scangate_commit_latency_seconds_count"),
            Some(2.0)
        );
        assert_eq!(t.live().scanners[0].rejects_today, 1);
    }

    #[test]
    fn failures_log_once_at_their_level() {
        let e = "disk full";
        let logs = logged(|| {
            OutboxWriteFailed {
                db: std::path::Path::new("/state/scangate.db"),
                scans: 3,
                error: &e,
                retry_in: Duration::from_millis(50),
            }
            .emit()
        });
        assert_eq!(one(&logs).level, tracing::Level::ERROR);
        assert!(one(&logs).field("message").unwrap().contains("disk full"));
        let logs = logged(|| {
            ScanNotStored {
                scanner: "counter-1",
                scan_uuid: "u-1",
            }
            .emit()
        });
        assert_eq!(one(&logs).level, tracing::Level::ERROR);
        for place in [
            AnchorPlace::StateFile,
            AnchorPlace::StateFileAtStop,
            AnchorPlace::Facility,
        ] {
            let logs = logged(|| AnchorFailed { place, error: &e }.emit());
            assert_eq!(one(&logs).level, tracing::Level::WARN, "{place:?}");
        }
        let logs = logged(|| {
            AnchorWritten {
                state_id: "s",
                seq: 4,
                hash: "h",
            }
            .emit()
        });
        assert_eq!(one(&logs).target, "scangate::anchor");
        assert_eq!(one(&logs).field("audit_head_seq"), Some("4"));
    }

    #[test]
    fn facility_events_log_once_at_their_level() {
        let down = |outage| {
            logged(|| {
                FacilityUnavailable {
                    redis: "redis://f:6379/",
                    lane: "replay",
                    reason: "connection refused",
                    outage,
                }
                .emit()
            })
        };
        let begins = down(Outage::Begins);
        assert_eq!(one(&begins).level, tracing::Level::WARN);
        assert_eq!(one(&begins).field("reason"), Some("connection refused"));
        assert_eq!(one(&down(Outage::Continues)).level, tracing::Level::DEBUG);
        let backlog = down(Outage::Backlog {
            waiting: Ok((3, 40)),
            next: Duration::from_secs(1),
        });
        assert!(
            one(&backlog)
                .field("message")
                .unwrap()
                .contains("3 scans wait in the outbox"),
            "{backlog:?}"
        );
        let up = logged(|| {
            FacilityAnswers {
                redis: "redis://f:6379/",
                lane: "live",
                outage: Duration::from_secs(5),
                doing: "new scans are claimed as they come",
            }
            .emit()
        });
        assert_eq!(
            (one(&up).level, one(&up).field("outage_s")),
            (tracing::Level::INFO, Some("5"))
        );
        let clock = |offset_ms| {
            logged(|| {
                ClockMeasured {
                    redis: "r",
                    offset_ms,
                    bound_ms: 2.0,
                    worth_ms: 150.0,
                    window_ms: 3000,
                }
                .emit()
            })
        };
        let off = clock(-4000.0);
        assert_eq!(one(&off).level, tracing::Level::WARN);
        assert!(
            one(&off)
                .field("message")
                .unwrap()
                .contains("4.000 s ahead of the facility Redis's (± 2.0 ms), more than 150 ms (5 % of the 3000 ms window)"),
            "{off:?}"
        );
        assert_eq!(one(&clock(10.0)).level, tracing::Level::INFO);
        let e = "timeout";
        let failed = logged(|| {
            ClockMeasureFailed {
                redis: "r",
                error: &e,
            }
            .emit()
        });
        assert_eq!(one(&failed).level, tracing::Level::WARN);
        let publish = logged(|| {
            PublishFailed {
                errors: Some("disk full"),
            }
            .emit()
        });
        assert_eq!(one(&publish).level, tracing::Level::WARN);
        let again = logged(|| PublishFailed { errors: None }.emit());
        assert_eq!(one(&again).level, tracing::Level::INFO);
        let past = logged(|| {
            CommittedPastRetention {
                scans: 2,
                retention: Duration::from_secs(72 * 3600),
            }
            .emit()
        });
        assert_eq!(one(&past).level, tracing::Level::WARN);
        assert_eq!(one(&past).target, "scangate::gate");
        assert_eq!(one(&past).field("scans"), Some("2"));
        assert_eq!(one(&past).field("retention_h"), Some("72"));
    }

    #[test]
    fn lane_database_failures_and_clock_waits_log_once() {
        let e = "disk I/O error";
        for step in [LaneDbStep::Reading, LaneDbStep::Writing] {
            let logs = logged(|| {
                LaneDbFailed {
                    lane: "live",
                    step,
                    error: &e,
                    retry_in: Duration::from_millis(400),
                }
                .emit()
            });
            assert_eq!(one(&logs).level, tracing::Level::ERROR, "{step:?}");
            assert!(
                one(&logs)
                    .field("message")
                    .unwrap()
                    .contains("retrying in 400ms"),
                "{logs:?}"
            );
        }
        let waiting = |n| {
            logged(|| {
                ClockWaiting {
                    redis: "r",
                    lane: "replay",
                    waiting: n,
                    max_clock_error_ms: 500,
                }
                .emit()
            })
        };
        assert_eq!(one(&waiting(3)).level, tracing::Level::WARN);
        assert_eq!(one(&waiting(0)).level, tracing::Level::INFO);
    }

    #[test]
    fn disk_failures_log_once_at_their_level() {
        let (e, db) = (
            "disk I/O error",
            std::path::Path::new("/var/lib/scangate/scangate.db"),
        );
        for then in [
            DecidingThen::StoredPending,
            DecidingThen::RetriedEvery(Duration::from_secs(1)),
        ] {
            let logs = logged(|| DecidingFailed { error: &e, then }.emit());
            assert_eq!(one(&logs).level, tracing::Level::ERROR, "{then:?}");
        }
        let every = Duration::from_secs(600);
        for (step, level) in [
            (SweepStep::PageCheck { every }, tracing::Level::ERROR),
            (SweepStep::ShrinkCache, tracing::Level::WARN),
            (SweepStep::ClearRaw { every }, tracing::Level::WARN),
            (SweepStep::TruncateWal, tracing::Level::WARN),
        ] {
            let logs = logged(|| {
                SweepFailed {
                    db,
                    step,
                    error: &e,
                }
                .emit()
            });
            assert_eq!(one(&logs).level, level, "{step:?}");
            assert_eq!(one(&logs).field("db"), Some(db.to_str().unwrap()));
        }
        let logs = logged(|| CheckpointFailed { db, error: &e }.emit());
        assert_eq!(one(&logs).level, tracing::Level::WARN);
    }

    #[test]
    fn lifecycle_events_log_once_with_their_fields() {
        let db = std::path::Path::new("/var/lib/scangate/scangate.db");
        let logs = logged(|| {
            Starting {
                db,
                facility: "f-1",
                gateway: "g-1",
                scanners: 2,
                window_ms: 3000,
                facility_redis: false,
            }
            .emit()
        });
        let l = one(&logs);
        assert_eq!(
            (
                l.level,
                l.field("message"),
                l.field("store"),
                l.field("scanners")
            ),
            (
                tracing::Level::INFO,
                Some("scangate starting"),
                Some("embedded"),
                Some("2")
            )
        );
        assert_eq!(l.target, "scangate::daemon");
        let stats = crate::model::GateStats {
            committed: 5,
            ..Default::default()
        };
        let logs = logged(|| Lifecycle::Stopped { stats: &stats }.emit());
        assert_eq!(
            (one(&logs).level, one(&logs).field("committed")),
            (tracing::Level::INFO, Some("5"))
        );
        let logs = logged(|| {
            Lifecycle::StopExtended {
                line: "stopping: draining for 3 s",
                by: Duration::from_secs(10),
            }
            .emit()
        });
        assert_eq!(
            one(&logs).field("message"),
            Some("stopping: draining for 3 s; the stop timeout is extended by 10s")
        );
        let logs = logged(|| StartWarning::NoFacilityStore { waiting: 4 }.emit());
        assert_eq!(
            (one(&logs).level, one(&logs).field("scans")),
            (tracing::Level::WARN, Some("4"))
        );
        let logs = logged(|| {
            StageFailed::Panicked {
                stage: &"outbox writer",
                why: "panicked: boom",
            }
            .emit()
        });
        assert_eq!(
            (one(&logs).level, one(&logs).field("message")),
            (
                tracing::Level::ERROR,
                Some("the outbox writer panicked: boom")
            )
        );
        let logs = logged(|| {
            StageFailed::Corrupt {
                db,
                detail: "bad page",
                stopping: true,
            }
            .emit()
        });
        assert_eq!(one(&logs).field("db"), Some(db.to_str().unwrap()));
        assert_eq!(
            one(&logged(|| StageFailed::AnchorThreadPanicked.emit())).level,
            tracing::Level::WARN
        );
    }

    #[test]
    fn a_reload_sets_the_scanners_and_a_refusal_names_the_keys() {
        let t = telemetry();
        let names = ["counter-1".to_string(), "counter-2".to_string()];
        let logs = logged(|| {
            Reloaded {
                added: 1,
                removed: 0,
                changed: 0,
                described: "added counter-2",
                scanners: &names,
            }
            .emit(&t)
        });
        let l = one(&logs);
        assert_eq!(
            (l.level, l.target.as_str(), l.field("added")),
            (tracing::Level::INFO, "scangate::reload", Some("1"))
        );
        assert_eq!(
            value(&t, "scangate_scanner_up{scanner=\"counter-2\"}"),
            Some(0.0)
        );
        let keys = ["gateway.id".to_string()];
        let logs = logged(|| ReloadRefused::NeedsRestart { keys: &keys }.emit());
        assert_eq!(
            (one(&logs).level, one(&logs).field("keys")),
            (tracing::Level::WARN, Some("gateway.id"))
        );
        let e = "expected `=`";
        let logs = logged(|| {
            ReloadRefused::ConfigError {
                at: " (line 3)",
                error: &e,
                scanners: 1,
            }
            .emit()
        });
        assert_eq!(one(&logs).level, tracing::Level::ERROR);
    }

    #[test]
    fn claimer_events_keep_their_module_targets_and_levels() {
        let info = crate::model::ServerInfo {
            version: "7.2.4".into(),
            maxmemory_policy: "noeviction".into(),
            appendonly: "yes".into(),
            save: String::new(),
            role: "master".into(),
            connected_replicas: 1,
            has_waitaof: true,
        };
        let logs = logged(|| {
            FacilityConnected {
                redis: "redis://f:6379/",
                server: "f:6379",
                lane: "live",
                info: &info,
            }
            .emit()
        });
        let l = one(&logs);
        assert_eq!(
            (
                l.level,
                l.target.as_str(),
                l.field("replicas"),
                l.field("role")
            ),
            (
                tracing::Level::INFO,
                "scangate::daemon::claimer",
                Some("1"),
                Some("master")
            )
        );
        let unwaited = logged(|| {
            Confirmation::Unwaited {
                redis: "r",
                lane: "live",
                connected: 2,
            }
            .emit()
        });
        assert_eq!(one(&unwaited).level, tracing::Level::WARN);
        let e = "disk I/O error";
        for (what, target) in [
            (Recording::FacilityState, "scangate::daemon::claimer"),
            (Recording::LedgerStream, "scangate::daemon::claimer::lane"),
        ] {
            let logs = logged(|| RecordingFailed { what, error: &e }.emit());
            assert_eq!(
                (one(&logs).level, one(&logs).target.as_str()),
                (tracing::Level::WARN, target)
            );
        }
        let done = crate::model::Reconciliation {
            at_ms: 0,
            lost_marker: "m".into(),
            republished: 12,
            conflicts: 1,
            took_ms: 30,
        };
        let logs = logged(|| {
            Reconcile::Done {
                redis: "r",
                lane: "replay",
                done: &done,
            }
            .emit()
        });
        assert_eq!(one(&logs).field("republished"), Some("12"));
        assert!(
            one(&logs)
                .field("message")
                .unwrap()
                .contains("1 conflict(s): picks")
        );
        let logs = logged(|| {
            Reconcile::Conflict {
                scan: "u-1",
                other_scan: "u-2",
                other_gateway: None,
                by: "another gateway",
            }
            .emit()
        });
        assert_eq!(
            (
                one(&logs).target.as_str(),
                one(&logs).field("other_gateway")
            ),
            ("scangate::daemon::claimer::reconcile", Some("unknown"))
        );
        let refused = logged(|| {
            FacilityRefuses {
                redis: "r",
                lane: "live",
                reason: "WRONGPASS",
            }
            .emit()
        });
        assert_eq!(one(&refused).level, tracing::Level::ERROR);
        let trimmed = logged(|| {
            LedgerTrim::Trimmed {
                redis: "r",
                trimmed: 5,
                entries: 7,
            }
            .emit()
        });
        assert_eq!(
            (one(&trimmed).level, one(&trimmed).field("trimmed")),
            (tracing::Level::INFO, Some("5"))
        );
    }

    #[test]
    fn source_and_watchdog_events_log_once_with_their_fields() {
        let h = "p50 1 ms";
        let logs = logged(|| {
            AckLatency {
                scanner: "counter-1",
                naks: 2,
                span: AckSpan::Last(Duration::from_secs(60)),
                summary: &h,
            }
            .emit()
        });
        let l = one(&logs);
        assert_eq!(
            (l.target.as_str(), l.field("naks"), l.field("scanner")),
            ("scangate::ack_latency", Some("2"), Some("counter-1"))
        );
        assert!(l.field("message").unwrap().contains("last 60s: p50 1 ms"));
        let logs = logged(|| {
            HidGrab::NoNode {
                scanner: "counter-1",
                device: std::path::Path::new("/dev/hidraw0"),
                name: "hidraw0",
            }
            .emit()
        });
        assert_eq!(
            (one(&logs).level, one(&logs).target.as_str()),
            (tracing::Level::ERROR, "scangate::source::hid::device")
        );
        let e = "permission denied";
        let logs = logged(|| {
            SourceFailed::SerialOpen {
                scanner: "counter-1",
                device: "/dev/ttyUSB0",
                error: e,
                every: Duration::from_secs(5),
            }
            .emit()
        });
        assert_eq!(
            (one(&logs).level, one(&logs).field("device")),
            (tracing::Level::WARN, Some("/dev/ttyUSB0"))
        );
        let logs = logged(|| {
            Wedge::Stuck {
                stage: "outbox writer",
                bound: Duration::from_secs(30),
            }
            .emit()
        });
        assert_eq!(
            (one(&logs).level, one(&logs).field("stage")),
            (tracing::Level::ERROR, Some("outbox writer"))
        );
        assert_eq!(
            one(&logged(|| Wedge::Moves {
                stage: "outbox writer"
            }
            .emit()))
            .level,
            tracing::Level::INFO
        );
        let w = "2 days left";
        assert_eq!(
            one(&logged(|| DiskSpace::Short { warning: &w }.emit())).level,
            tracing::Level::WARN
        );
        assert_eq!(
            one(&logged(|| DiskSpace::Lasts.emit())).level,
            tracing::Level::INFO
        );
        for (step, level, target) in [
            (
                MetricsStep::Sampling,
                tracing::Level::ERROR,
                "scangate::metrics",
            ),
            (
                MetricsStep::Accept,
                tracing::Level::WARN,
                "scangate::metrics::http",
            ),
        ] {
            let logs = logged(|| MetricsFailed { step, error: &e }.emit());
            assert_eq!(
                (one(&logs).level, one(&logs).target.as_str()),
                (level, target)
            );
        }
        let logs = logged(|| AuditRecordUnreadable { seq: 9, error: &e }.emit());
        assert_eq!(one(&logs).target, "scangate::audit");
    }

    #[test]
    fn a_facility_clock_step_is_a_warning_with_its_size() {
        let logs = logged(|| {
            FacilityClockStepped {
                step_ms: 5000.0,
                window_ms: 3000,
            }
            .emit()
        });
        assert_eq!(one(&logs).level, tracing::Level::WARN);
        assert_eq!(one(&logs).field("step_ms"), Some("5000.0"));
        assert!(
            one(&logs).field("message").unwrap().contains("5000 ms"),
            "{logs:?}"
        );
        let slewed = logged(|| {
            FacilityClockStepped {
                step_ms: -40.0,
                window_ms: 3000,
            }
            .emit()
        });
        assert_eq!(one(&slewed).level, tracing::Level::INFO);
    }

    #[test]
    fn ledger_follow_events_log_once_at_their_level() {
        let claimed = logged(|| {
            LedgerFollow::Claimed {
                group: "inventory",
                consumer: "new",
                entries: 3,
                idle: Duration::from_secs(3600),
            }
            .emit()
        });
        assert_eq!(one(&claimed).level, tracing::Level::WARN);
        assert_eq!(one(&claimed).field("entries"), Some("3"));
        assert_eq!(one(&claimed).target, "scangate::facility::stream");
        let created = logged(|| {
            LedgerFollow::GroupCreated {
                stream: "scangate:{f}:ledger",
                group: "inventory",
            }
            .emit()
        });
        assert_eq!(one(&created).level, tracing::Level::INFO);
        let refused = logged(|| {
            LedgerFollow::ClaimRefused {
                group: "inventory",
                consumer: "new",
                error: &"NOPERM",
            }
            .emit()
        });
        assert_eq!(one(&refused).level, tracing::Level::WARN);
        assert!(
            one(&refused)
                .field("message")
                .unwrap()
                .contains("+xautoclaim"),
            "{refused:?}"
        );
    }
}
