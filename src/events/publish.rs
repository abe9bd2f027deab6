//! The publisher: metrics and status file failures, the disk running short;
//! the `/metrics` endpoint: reachable beyond this host, connections it
//! closed without an answer; the tap socket: readers attached, left, refused.

use super::Event;
use crate::telemetry::Telemetry;
use std::net::{IpAddr, SocketAddr};

// The log targets operators filter on (`RUST_LOG`, the journal): keep the values.
const METRICS_TARGET: &str = "scangate::metrics";
const METRICS_HTTP_TARGET: &str = "scangate::metrics::http";
const TAP_TARGET: &str = "scangate::tap";

/// Publishing the metrics or the status file failed, or works again
/// (told once per change of what fails).
pub struct PublishFailed<'a> {
    /// What fails (`None`: publishing works again).
    pub errors: Option<&'a str>,
}

impl Event for PublishFailed<'_> {
    /// Log it: WARN, or INFO when it works again.
    fn emit(self) {
        match self.errors {
            Some(e) => tracing::warn!(target: METRICS_TARGET, "metrics/status: {e}; retrying"),
            None => tracing::info!(target: METRICS_TARGET, "metrics/status: published again"),
        }
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

impl Event for DiskSpace<'_> {
    /// Log it: WARN when short, INFO when it lasts again.
    fn emit(self) {
        match self {
            DiskSpace::Short { warning } => {
                tracing::warn!(target: METRICS_TARGET, "disk space: {warning}")
            }
            DiskSpace::Lasts => tracing::info!(
                target: METRICS_TARGET,
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

impl Event for MetricsFailed<'_> {
    /// Log it: ERROR when sampling failed, WARN when accepting did.
    fn emit(self) {
        let e = self.error;
        match self.step {
            MetricsStep::Sampling => {
                tracing::error!(target: METRICS_TARGET, "metrics/status sampling failed: {e}")
            }
            MetricsStep::Accept => tracing::warn!(
                target: METRICS_HTTP_TARGET,
                "[metrics] listen: accept failed: {e}"
            ),
        }
    }
}

/// Why the `/metrics` server closed a connection without an answer
/// ([`MetricsConnectionDropped`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricsDrop {
    /// A newer connection came at the bound on open connections (in all,
    /// or from its peer): this one, the oldest still waiting for its
    /// request head (or, with none waiting, the oldest), made room.
    Room,
    /// It sent no complete request head in time.
    HeadTimeout,
    /// It did not take the response in time.
    WriteTimeout,
}

impl MetricsDrop {
    /// Every reason, in the order of the metric's series.
    #[cfg(test)]
    pub const ALL: [MetricsDrop; 3] = [
        MetricsDrop::Room,
        MetricsDrop::HeadTimeout,
        MetricsDrop::WriteTimeout,
    ];

    /// Its `reason` label.
    pub fn as_str(self) -> &'static str {
        match self {
            MetricsDrop::Room => "room",
            MetricsDrop::HeadTimeout => "head_timeout",
            MetricsDrop::WriteTimeout => "write_timeout",
        }
    }
}

/// The `/metrics` server closed a connection without an answer: counted
/// (`scangate_metrics_http_dropped_connections_total{reason}`), logged at
/// DEBUG (target `scangate::metrics::http`). The WARN telling them is
/// [`MetricsConnectionsDropped`], at most once a minute.
pub struct MetricsConnectionDropped<'a> {
    /// Why.
    pub reason: MetricsDrop,
    /// The peer's address.
    pub peer: IpAddr,
    /// The metrics it updates.
    pub telemetry: &'a Telemetry,
}

impl Event for MetricsConnectionDropped<'_> {
    /// Count it; log it (DEBUG).
    fn emit(self) {
        let reason = self.reason.as_str();
        self.telemetry.metrics_http_dropped(reason);
        tracing::debug!(
            target: METRICS_HTTP_TARGET,
            peer = %self.peer, reason,
            "[metrics] listen: closed a connection from {} without an answer ({reason})",
            self.peer
        );
    }
}

/// Connections the `/metrics` server closed without an answer since it
/// last told them (WARN, target `scangate::metrics::http`): the first at
/// once, then at most once a minute while more come.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsConnectionsDropped {
    /// Closed to make room for newer ones.
    pub room: u64,
    /// Closed without a complete request head in time.
    pub head_timeout: u64,
    /// Closed without taking the response in time.
    pub write_timeout: u64,
    /// The peer of the last of them.
    pub last_peer: IpAddr,
}

impl Event for MetricsConnectionsDropped {
    /// Log it (WARN).
    fn emit(self) {
        let MetricsConnectionsDropped {
            room,
            head_timeout,
            write_timeout,
            last_peer,
        } = self;
        let closed = room + head_timeout + write_timeout;
        tracing::warn!(
            target: METRICS_HTTP_TARGET,
            closed, room, head_timeout, write_timeout, peer = %last_peer,
            "[metrics] listen: closed {closed} connection(s) without an answer \
             ({room} to make room for newer ones at the bound on open connections, \
             {head_timeout} that sent no complete request head in time, \
             {write_timeout} that did not take the response in time), the last from {last_peer}. \
             Scrapes are still answered. If these are not a known scraper's, something else reaches the metrics port: \
             listen on 127.0.0.1, or let a firewall admit only the Prometheus server (told at most once a minute)"
        );
    }
}

/// `[metrics] listen` is not a loopback address (WARN at start, target
/// `scangate::metrics::http`): `/metrics` answers whoever reaches it.
pub struct MetricsExposed<'a> {
    /// The address.
    pub listen: SocketAddr,
    /// The whole warning: what, why it matters, the fix
    /// ([`crate::config::MetricsConfig::exposure_warning`]).
    pub warning: &'a str,
}

impl Event for MetricsExposed<'_> {
    /// Log it (WARN).
    fn emit(self) {
        tracing::warn!(
            target: METRICS_HTTP_TARGET,
            listen = %self.listen,
            "{}", self.warning
        );
    }
}

/// What happened on the tap socket (`scangate tap`).
pub enum Tap<'a> {
    /// It could not be opened (WARN): the daemon runs without it.
    Unavailable {
        /// The socket's path.
        path: &'a std::path::Path,
        /// Why.
        error: &'a dyn std::fmt::Display,
    },
    /// A reader attached (INFO).
    Attached {
        /// Readers attached now, this one included.
        readers: usize,
        /// It asked for the raw bytes of each read.
        raw: bool,
    },
    /// A reader left (INFO), having lost `lost` lines by falling behind.
    Detached {
        /// Readers still attached.
        readers: usize,
        /// Lines it lost.
        lost: u64,
    },
    /// A reader was refused (WARN): too many attached, or no greeting.
    Refused {
        /// Why.
        why: &'a str,
    },
    /// Accepting a connection failed (WARN; tried again in a moment).
    AcceptFailed {
        /// Why.
        error: &'a dyn std::fmt::Display,
    },
}

impl Event for Tap<'_> {
    /// Log it: WARN when unavailable or refused, INFO otherwise.
    fn emit(self) {
        match self {
            Tap::Unavailable { path, error } => tracing::warn!(
                target: TAP_TARGET,
                path = %path.display(),
                "the tap socket {} cannot be opened ({error}): `scangate tap` and `scangate top` cannot attach; scans are read and decided as before",
                path.display()
            ),
            Tap::Attached { readers, raw } => tracing::info!(
                target: TAP_TARGET,
                readers, raw,
                "a tap reader attached{} ({readers} now)",
                if raw { ", with raw bytes" } else { "" }
            ),
            Tap::Detached { readers, lost } => tracing::info!(
                target: TAP_TARGET,
                readers, lost,
                "a tap reader left ({readers} now; it lost {lost} line(s) by falling behind)"
            ),
            Tap::Refused { why } => {
                tracing::warn!(target: TAP_TARGET, "a tap reader was refused: {why}")
            }
            Tap::AcceptFailed { error } => tracing::warn!(
                target: TAP_TARGET,
                "the tap socket: accept failed ({error}); trying again in 100 ms"
            ),
        }
    }
}
