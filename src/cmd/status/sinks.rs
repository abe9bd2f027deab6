//! The `[[sink]]`s in `status`: each one's cursor (its ledger consumer
//! `sink.<name>`), its held batch and what its attempts met. A blocked
//! sink, or one failing for longer than [`FAILING_DEGRADED_S`], is a
//! degraded gateway.

use crate::config::Config;
use crate::daemon::publish::{StoredSample, age_s};
use crate::sink::consumer_name;
use crate::sink::held::HeldState;
use serde::Serialize;

/// A sink whose attempts have failed this long (seconds) is a degraded
/// gateway (sooner if it is blocked).
pub const FAILING_DEGRADED_S: f64 = 600.0;

/// One `[[sink]]`.
#[derive(Debug, Clone, Serialize)]
pub struct SinkView {
    /// Its name.
    pub name: String,
    /// Its URL.
    pub url: String,
    /// `json` or `epcis`.
    pub format: &'static str,
    /// The last entry its receiver took (its cursor; 0: none yet).
    pub delivered_through_seq: i64,
    /// Entries after it, not delivered.
    pub behind: i64,
    /// Age in seconds, by capture time, of the oldest of them.
    pub oldest_undelivered_age_s: Option<f64>,
    /// When its receiver last took a batch (Unix ms).
    pub delivered_ms: Option<i64>,
    /// The batch it is sending (`None`: none held).
    pub held: Option<HeldView>,
    /// Its receiver refuses the held batch for good until someone acts.
    pub blocked: bool,
}

/// A sink's held batch.
#[derive(Debug, Clone, Serialize)]
pub struct HeldView {
    /// Its first entry.
    pub first_seq: i64,
    /// Its last.
    pub last_seq: i64,
    /// Entries in it.
    pub entries: i64,
    /// Its `Idempotency-Key`.
    pub idempotency_key: String,
    /// What its attempts met.
    #[serde(flatten)]
    pub state: HeldState,
}

/// Each configured sink, from the sample; its reasons to worry added to
/// `degraded`.
pub(super) fn views(
    cfg: &Config,
    stored: &StoredSample,
    now_ms: i64,
    degraded: &mut Vec<String>,
) -> Vec<SinkView> {
    cfg.sinks
        .iter()
        .map(|s| {
            let consumer = consumer_name(&s.name);
            let lag = stored.ledger_consumers.iter().find(|c| c.name == consumer);
            let held = stored
                .sink_batches
                .iter()
                .find(|h| h.sink == s.name)
                .map(|h| HeldView {
                    first_seq: h.batch.first_seq,
                    last_seq: h.batch.last_seq,
                    entries: h.batch.entries,
                    idempotency_key: h.batch.key.clone(),
                    state: h.state.clone(),
                });
            let state = held.as_ref().map(|h| &h.state);
            let blocked = state.is_some_and(|st| st.blocked);
            let failing_s = state
                .and_then(|st| st.failing_since_ms)
                .map(|ms| age_s(now_ms, ms));
            let error = state.and_then(|st| st.last_error.as_deref()).unwrap_or("?");
            if blocked {
                degraded.push(format!(
                    "sink {}: {} refuses its batch (entries {}..={}): {error}. Nothing is dropped; it is sent again every 10 min. Fix the receiver or the [[sink]] config, then `systemctl reload scangate` sends it at once",
                    s.name,
                    s.shown_url(),
                    held.as_ref().map_or(0, |h| h.first_seq),
                    held.as_ref().map_or(0, |h| h.last_seq),
                ));
            } else if let Some(f) = failing_s.filter(|f| *f > FAILING_DEGRADED_S) {
                degraded.push(format!(
                    "sink {}: POSTs to {} have failed for {:.0} min (last: {error}); it retries by itself. Check the receiver and the network",
                    s.name,
                    s.shown_url(),
                    f / 60.0
                ));
            }
            SinkView {
                name: s.name.clone(),
                url: s.shown_url(),
                format: s.format.as_str(),
                delivered_through_seq: lag.map_or(0, |l| l.acked_seq),
                behind: lag.map_or(0, |l| l.behind),
                oldest_undelivered_age_s: lag
                    .and_then(|l| l.oldest_unacked_ms)
                    .map(|ms| age_s(now_ms, ms)),
                delivered_ms: lag.and_then(|l| l.acked_ms),
                held,
                blocked,
            }
        })
        .collect()
}

/// A sink's line of `status`.
pub(super) fn render(s: &SinkView) -> String {
    use crate::capture::clock::rfc3339_ms;
    let state = match &s.held {
        _ if s.blocked => "BLOCKED".to_string(),
        Some(h) if h.state.attempts > 0 => {
            format!("retrying ({} failed attempts)", h.state.attempts)
        }
        _ => "ok".to_string(),
    };
    let mut line = format!(
        "sink {} ({} to {}): {state}; delivered through entry {}, {} behind; last delivered {}",
        s.name,
        s.format,
        s.url,
        s.delivered_through_seq,
        s.behind,
        s.delivered_ms.map_or_else(|| "never".into(), rfc3339_ms)
    );
    if let Some(h) = &s.held
        && let Some(e) = &h.state.last_error
    {
        line += &format!(
            "; holding entries {}..={} (Idempotency-Key {}), last error: {e}",
            h.first_seq, h.last_seq, h.idempotency_key
        );
    }
    line
}
