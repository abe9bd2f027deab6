//! The anchor thread: every [`ANCHOR_EVERY`] it anchors the audit chain's
//! head outside the database — in the state directory's identity file and,
//! with `[redis]`, in the facility store — and once more at stop, after
//! the stages have written their last records.

use crate::config::{Config, RedisSettings};
use crate::events::{self, Event as _};
use crate::facility::Facility;
use crate::shutdown::Stop;
use crate::store::StoreError;
use crate::store::identity::{ANCHOR_EVERY, Anchor, Head};
use crate::telemetry::Telemetry;
use std::path::Path;
use std::thread::JoinHandle;
use std::time::Duration;

/// The running anchor thread ([`start`]); [`Anchoring::finish`] anchors
/// once more at stop.
pub(super) struct Anchoring(JoinHandle<(Anchor, Option<FacilityAnchor>)>);

/// Start anchoring the chain head of `state_dir`'s database until `stop`.
pub(super) fn start(
    state_dir: &Path,
    cfg: &Config,
    redis: Option<&RedisSettings>,
    telemetry: &Telemetry,
    stop: Stop,
) -> Result<Anchoring, StoreError> {
    let mut anchor = Anchor::new(state_dir, Some(cfg.outbox.min_free_mb))?;
    let mut facility = redis.map(|r| FacilityAnchor::new(cfg, r));
    let telemetry = telemetry.clone();
    std::thread::Builder::new()
        .name("anchor".into())
        .spawn(move || {
            while !stop.sleep(ANCHOR_EVERY) {
                match anchor.tick() {
                    // (Written, or found current: the head is anchored.)
                    Ok(_) => telemetry.anchored(),
                    Err(e) => events::AnchorFailed {
                        place: events::AnchorPlace::StateFile,
                        error: &e,
                    }
                    .emit(),
                }
                if let Some(f) = &mut facility {
                    f.put(&anchor);
                }
            }
            (anchor, facility)
        })
        .map(Anchoring)
        .map_err(|e| StoreError::StateDir {
            dir: state_dir.to_owned(),
            source: e,
        })
}

impl Anchoring {
    /// Once the stop token is set: wait for the thread, then anchor the head
    /// as the stages left it.
    pub(super) fn finish(self) {
        match self.0.join() {
            Ok((mut anchor, mut facility)) => {
                if let Err(e) = anchor.tick() {
                    events::AnchorFailed {
                        place: events::AnchorPlace::StateFileAtStop,
                        error: &e,
                    }
                    .emit();
                }
                if let Some(f) = &mut facility {
                    f.put(&anchor);
                }
            }
            Err(_) => events::StageFailed::AnchorThreadPanicked.emit(),
        }
    }
}

/// The chain head anchored in the facility Redis too
/// (`scangate:{f}:anchor:<gateway>`), on a connection of its own, at most
/// every [`ANCHOR_EVERY`] and at stop; a failure
/// is logged and retried at the next tick.
struct FacilityAnchor {
    /// `[redis]`, secrets read: each connect asks where the primary is
    /// (Sentinel, or the cluster's slot map).
    redis: RedisSettings,
    facility: String,
    gateway: String,
    window_ms: i64,
    conn: Option<Facility>,
    sent: Option<Head>,
}

impl FacilityAnchor {
    fn new(cfg: &Config, redis: &RedisSettings) -> FacilityAnchor {
        FacilityAnchor {
            redis: redis.clone(),
            facility: cfg.gateway.facility.clone(),
            gateway: cfg.gateway.id.clone(),
            window_ms: cfg.window().ms(),
            conn: None,
            sent: None,
        }
    }

    fn put(&mut self, anchor: &Anchor) {
        let Some(head) = anchor.head() else { return };
        if self.sent.as_ref() == Some(head) {
            return;
        }
        let done = (|| -> Result<(), String> {
            if self.conn.is_none() {
                self.conn = Some(
                    crate::facility::connect(
                        &self.redis,
                        &self.facility,
                        self.window_ms,
                        Duration::ZERO,
                    )
                    .map_err(|e| e.to_string())?,
                );
            }
            let conn = self.conn.as_mut().expect("connected above");
            conn.put_anchor(&self.gateway, anchor.state_id(), head.seq, &head.hash)
                .map_err(|e| e.to_string())
        })();
        match done {
            Ok(()) => self.sent = Some(head.clone()),
            Err(e) => {
                self.conn = None;
                events::AnchorFailed {
                    place: events::AnchorPlace::Facility,
                    error: &e,
                }
                .emit();
            }
        }
    }
}
