//! The HTTP sinks (`[[sink]]`, `src/sink/`): target `scangate::sink`.
//! Each event logs and moves its metric (`scangate_sink_*`).

use super::Event;
use crate::telemetry::Telemetry;
use std::time::Duration;

// The log targets operators filter on (`RUST_LOG`, the journal): keep the values.
const SINK_TARGET: &str = "scangate::sink";

/// A sink's thread started (INFO).
pub struct SinkStarted<'a> {
    /// The sink.
    pub sink: &'a str,
    /// Its URL.
    pub url: &'a str,
    /// `json` or `epcis`.
    pub format: &'a str,
}

impl Event for SinkStarted<'_> {
    /// Log it.
    fn emit(self) {
        let SinkStarted { sink, url, format } = self;
        tracing::info!(
            target: SINK_TARGET,
            sink,
            "sink {sink}: POSTing the ledger as {format} to {url}, from the cursor of ledger consumer sink.{sink}"
        );
    }
}

/// What happened to a sink's batch (the kinds that move a metric carry
/// the telemetry).
pub enum SinkEvent<'a> {
    /// A batch was made and held, before its first POST (DEBUG).
    Held {
        /// The sink.
        sink: &'a str,
        /// Its first entry's position.
        first_seq: i64,
        /// Its last entry's position.
        last_seq: i64,
        /// Entries in it.
        entries: i64,
        /// Its `Idempotency-Key`.
        key: &'a str,
    },
    /// The receiver answered 2xx: the cursor moved past the batch (INFO
    /// after failed attempts, else DEBUG).
    Delivered {
        /// The sink.
        sink: &'a str,
        /// Its URL.
        url: &'a str,
        /// The status.
        status: u16,
        /// Entries delivered.
        entries: i64,
        /// The last of them.
        through_seq: i64,
        /// Attempts it took.
        attempts: i64,
        /// The consumer had been removed: nothing was acknowledged.
        consumer_gone: bool,
        /// The metrics it updates.
        telemetry: &'a Telemetry,
    },
    /// A POST failed in a way a retry may mend (WARN).
    Failed {
        /// The sink.
        sink: &'a str,
        /// Its URL.
        url: &'a str,
        /// `connect`, `timeout`, `tls`, `status_5xx`, …
        kind: &'a str,
        /// What happened.
        error: &'a str,
        /// Attempts of this batch so far.
        attempts: i64,
        /// The batch's first entry.
        first_seq: i64,
        /// Its last.
        last_seq: i64,
        /// The next attempt is in this long.
        retry_in: Duration,
        /// The metrics it updates.
        telemetry: &'a Telemetry,
    },
    /// The receiver refused the batch in a way a retry will not change
    /// (ERROR): kept, tried again every 10 minutes and at each reload.
    Blocked {
        /// The sink.
        sink: &'a str,
        /// Its URL.
        url: &'a str,
        /// `status_4xx`, `status_3xx`, `ca_file`.
        kind: &'a str,
        /// The status and the first bytes of the answer.
        error: &'a str,
        /// The batch's first entry.
        first_seq: i64,
        /// Its last.
        last_seq: i64,
        /// The next attempt (without a reload) is in this long.
        retry_in: Duration,
        /// The metrics it updates.
        telemetry: &'a Telemetry,
    },
    /// An entry cannot be an EPCIS event: nothing is sent (ERROR).
    Unmappable {
        /// The sink.
        sink: &'a str,
        /// Why.
        error: &'a str,
        /// The metrics it updates.
        telemetry: &'a Telemetry,
    },
    /// The held batch is made again from the cursor (INFO): its format
    /// changed or `batch` was lowered below its size.
    Recut {
        /// The sink.
        sink: &'a str,
        /// Why: the format changed, or `batch` was lowered below it.
        why: &'a str,
    },
    /// The database refused the sink's read or write (WARN): retried.
    StoreFailed {
        /// The sink.
        sink: &'a str,
        /// What SQLite said.
        error: &'a str,
        /// Tried again in this long.
        retry_in: Duration,
        /// The metrics it updates.
        telemetry: &'a Telemetry,
    },
}

impl Event for SinkEvent<'_> {
    /// Log it and move its metric.
    fn emit(self) {
        match self {
            SinkEvent::Held {
                sink,
                first_seq,
                last_seq,
                entries,
                key,
            } => tracing::debug!(
                target: SINK_TARGET,
                sink,
                first_seq,
                last_seq,
                entries,
                key,
                "sink {sink}: holding entries {first_seq}..={last_seq} ({entries}) under Idempotency-Key {key}"
            ),
            SinkEvent::Delivered {
                sink,
                url,
                status,
                entries,
                through_seq,
                attempts,
                consumer_gone,
                telemetry,
            } => {
                telemetry.sink_delivered(sink, entries as u64);
                if consumer_gone {
                    tracing::warn!(
                        target: SINK_TARGET,
                        sink,
                        "sink {sink}: delivered entries through {through_seq} to {url}, but its consumer sink.{sink} was removed meanwhile (`ledger consumers remove`): it registers again and sends from the first entry the ledger keeps"
                    );
                } else if attempts > 1 {
                    tracing::info!(
                        target: SINK_TARGET,
                        sink,
                        status,
                        entries,
                        through_seq,
                        attempts,
                        "sink {sink}: {url} took {entries} entries through {through_seq} (HTTP {status}) after {attempts} attempts"
                    );
                } else {
                    tracing::debug!(
                        target: SINK_TARGET,
                        sink,
                        status,
                        entries,
                        through_seq,
                        "sink {sink}: {url} took {entries} entries through {through_seq} (HTTP {status})"
                    );
                }
            }
            SinkEvent::Failed {
                sink,
                url,
                kind,
                error,
                attempts,
                first_seq,
                last_seq,
                retry_in,
                telemetry,
            } => {
                telemetry.sink_failure(sink, kind, false);
                tracing::warn!(
                    target: SINK_TARGET,
                    sink,
                    kind,
                    attempts,
                    "sink {sink}: POST of entries {first_seq}..={last_seq} to {url} failed ({kind}: {error}); attempt {attempts}, the same batch is sent again in {retry_in:?}"
                );
            }
            SinkEvent::Blocked {
                sink,
                url,
                kind,
                error,
                first_seq,
                last_seq,
                retry_in,
                telemetry,
            } => {
                telemetry.sink_failure(sink, kind, true);
                tracing::error!(
                    target: SINK_TARGET,
                    sink,
                    kind,
                    "sink {sink}: {url} refused entries {first_seq}..={last_seq} ({error}); a retry will not change that. They are kept, not dropped, and sent again in {retry_in:?} or at `systemctl reload scangate`: fix the receiver or the [[sink]] config, then reload"
                );
            }
            SinkEvent::Unmappable {
                sink,
                error,
                telemetry,
            } => {
                telemetry.sink_failure(sink, "epcis", true);
                tracing::error!(
                    target: SINK_TARGET,
                    sink,
                    "sink {sink}: {error}; nothing is sent from there on. Export it with `scangate ledger export --format json` and report it; format = \"json\" sends it"
                );
            }
            SinkEvent::Recut { sink, why } => tracing::info!(
                target: SINK_TARGET,
                sink,
                "sink {sink}: its held batch is made again ({why}): entries it held may come again under another Idempotency-Key (deduplicate by scan_uuid / eventID)"
            ),
            SinkEvent::StoreFailed {
                sink,
                error,
                retry_in,
                telemetry,
            } => {
                telemetry.sink_failure(sink, "database", false);
                tracing::warn!(
                    target: SINK_TARGET,
                    sink,
                    "sink {sink}: the database refused its read or write ({error}); tried again in {retry_in:?}"
                );
            }
        }
    }
}
