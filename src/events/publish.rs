//! The publisher: metrics and status file failures, the disk running short.

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
