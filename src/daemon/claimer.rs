//! The facility claimer thread (`[redis]` configured): decides the scans the
//! outbox writer made durable, through the facility store, in capture order.
//!
//! It owns a second SQLite connection and the gate; the redis client is
//! blocking, so it lives on this thread, never on the async runtime. While
//! Redis is unreachable, rounds only make local verdicts and mark the rest
//! `unresolved`, and the thread waits with capped back-off (no busy loop);
//! new scans are still admitted and ACKed by the writer meanwhile. When the
//! writer stops (its kick sender is dropped), one last round runs.

use crate::config::Config;
use crate::facility::config::RedisConfig;
use crate::facility::{Facility, FacilityError};
use crate::gate::{Gate, GateStats};
use crate::store::Store;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// How often scans held for an unsynchronised clock are looked at again.
const CLOCK_POLL: Duration = Duration::from_secs(1);

/// How to reach the facility store.
pub struct Link {
    url: String,
    ca_pem: Option<Vec<u8>>,
    shown: String,
    facility: String,
    window_ms: i64,
    retention: Duration,
    redis: RedisConfig,
}

impl Link {
    /// Resolve the configuration (reads the password file once).
    pub fn new(cfg: &Config, redis: &RedisConfig) -> Result<Link, String> {
        let password = redis.password()?;
        Ok(Link {
            url: redis.url_with_credentials(password.as_deref()),
            ca_pem: redis.ca_pem()?,
            shown: crate::facility::redact(&redis.url),
            facility: cfg.gateway.facility.clone(),
            window_ms: cfg.window_ms(),
            retention: Duration::from_secs(cfg.dedup.retention_hours * 3600),
            redis: redis.clone(),
        })
    }

    /// Connect and check the server; logs what it found.
    pub fn connect_checked(&self) -> Result<Facility, FacilityError> {
        let mut f = Facility::connect_with_ca(
            &self.url,
            self.ca_pem.clone(),
            &self.facility,
            self.window_ms,
            self.retention,
            self.redis.connect_timeout(),
            self.redis.command_timeout(),
        )?;
        f.set_min_replicas(self.redis.min_replicas_ack, self.redis.command_timeout());
        let info = f.check_server()?;
        tracing::info!(
            redis = %self.shown, version = %info.version, maxmemory_policy = %info.maxmemory_policy,
            appendonly = %info.appendonly, save = %info.save,
            "facility Redis connected"
        );
        if info.appendonly != "yes" {
            tracing::warn!(
                redis = %self.shown,
                "facility Redis has appendonly off: a Redis crash can lose recent claims; this gateway still suppresses echoes of its own commits"
            );
        }
        Ok(f)
    }
}

/// The claimer loop; returns the gate's counters when the writer is gone.
pub fn run(
    mut store: Store,
    mut gate: Gate,
    link: Link,
    mut facility: Option<Facility>,
    kicked: Receiver<()>,
) -> GateStats {
    gate.set_require_synced_clock(link.redis.require_synced_clock);
    let mut backoff = BACKOFF_MIN;
    let mut offline_reason = String::from("facility Redis not connected yet");
    let mut outage_since: Option<Instant> = None;
    let mut writer_gone = false;
    loop {
        if facility.is_none() {
            match link.connect_checked() {
                Ok(f) => facility = Some(f),
                Err(e) => offline_reason = e.to_string(),
            }
        }
        let now = crate::capture::CaptureTime::now();
        let round = gate.facility_round(&mut store, facility.as_mut(), &offline_reason, &now);
        let wait = match round {
            Err(e) => {
                tracing::error!("facility round failed on the local database: {e}; retrying");
                backoff
            }
            Ok(r) => match r.facility_error {
                Some(reason) => {
                    if outage_since.is_none() {
                        tracing::warn!(
                            redis = %link.shown,
                            "facility Redis unavailable: {reason}. Scans are kept in the outbox as unresolved and replayed in capture order when it answers"
                        );
                        outage_since = Some(Instant::now());
                    }
                    facility = None; // reconnect next time
                    offline_reason = reason;
                    let w = backoff;
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                    w
                }
                None => {
                    if let Some(since) = outage_since.take() {
                        tracing::info!(
                            redis = %link.shown,
                            outage_s = since.elapsed().as_secs(),
                            "facility Redis answers again; unresolved scans are being replayed"
                        );
                    }
                    backoff = BACKOFF_MIN;
                    if r.open == crate::gate::DECIDE_BATCH {
                        continue; // more backlog: next round at once
                    }
                    if writer_gone {
                        break;
                    }
                    if r.waiting_for_clock > 0 {
                        CLOCK_POLL // look again soon: NTP may have synced
                    } else {
                        Duration::from_secs(3600) // until the writer kicks
                    }
                }
            },
        };
        if writer_gone {
            // Shutdown: one last attempt was made; what is left stays durable.
            break;
        }
        match kicked.recv_timeout(wait) {
            Ok(()) => while kicked.try_recv().is_ok() {},
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => writer_gone = true,
        }
    }
    gate.stats()
}
