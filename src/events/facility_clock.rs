//! The facility clock as the claimer measures it, and scans waiting for facility time.

use super::Event;

// The log targets operators filter on (`RUST_LOG`, the journal): keep the values.
const CLAIMER_TARGET: &str = "scangate::daemon::claimer";

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

impl Event for ClockMeasured<'_> {
    /// Log it: WARN when the wall clock is off by more than `worth_ms`
    /// (beyond the bound), else INFO.
    fn emit(self) {
        let (off, bound, worth) = (self.offset_ms, self.bound_ms, self.worth_ms);
        let side = if off < 0.0 { "ahead of" } else { "behind" };
        let how_far = format!(
            "{:.3} s {side} the facility Redis's (± {bound:.1} ms)",
            off.abs() / 1e3
        );
        if off.abs() - bound > worth {
            tracing::warn!(
                target: CLAIMER_TARGET,
                redis = %self.redis, offset_ms = off, bound_ms = bound,
                "this gateway's wall clock is {how_far}, more than {worth:.0} ms ({:.0} % of the {} ms window). Claims are still compared on the facility's clock (each capture's boot-clock stamp mapped through these measurements), but the wall stamps this gateway writes into its audit trail are that far off. Fix: synchronise this gateway's clock (NTP, chrony) with the facility's",
                worth / self.window_ms as f64 * 100.0,
                self.window_ms
            );
        } else {
            tracing::info!(
                target: CLAIMER_TARGET,
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

impl Event for ClockMeasureFailed<'_> {
    /// Log it (WARN).
    fn emit(self) {
        tracing::warn!(
            target: CLAIMER_TARGET,
            redis = %self.redis,
            "measuring the facility Redis's clock failed: {}", self.error
        );
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

impl Event for ClockWaiting<'_> {
    /// Log it: WARN when scans begin to wait, INFO when none does any more.
    fn emit(self) {
        let (redis, lane, now) = (self.redis, self.lane, self.waiting);
        if now > 0 {
            tracing::warn!(
                target: CLAIMER_TARGET,
                redis = %redis, lane, waiting = now,
                "{now} scans wait: their capture times cannot be put on the facility clock within [redis] max_clock_error_ms = {} ms yet (no close enough measurement of it in their boot). They are claimed once the claimer has measured it closer (at every connect and every minute); `outbox status` shows the last measurement",
                self.max_clock_error_ms
            );
        } else {
            tracing::info!(
                target: CLAIMER_TARGET,
                redis = %redis, lane,
                "no scan waits for the facility clock any more"
            );
        }
    }
}
