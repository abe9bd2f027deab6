//! How the claimer reaches the facility store ([`Link`]: `[redis]`, the
//! checked connect each lane makes, what it logs of the server and its
//! clock), and the claimer started from it ([`start`]): connected once,
//! what the connection learned recorded, both lanes made ready for the
//! daemon to run, each on a thread of its own under its supervisor.

use super::{Kicker, LaneRun, LaneStop, lanes, records};
use crate::config::{Config, RedisSettings};
use crate::events::{self, Event as _};
use crate::facility::config::{RedisConfig, ReplicaAck};
use crate::facility::{Facility, FacilityError};
use crate::gate::Gate;
use crate::model::Decision;
use crate::model::{ClockSample, EchoWindow};
use crate::store::{Store, StoreError};
use crate::telemetry::Telemetry;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The claimer, started ([`start`]).
pub struct Claimer {
    /// Wakes the live lane: the writer's side.
    pub kick: Kicker,
    /// Stops the lanes, in the daemon's stop order.
    pub lane_stop: LaneStop,
    /// The lanes' shared link (told of reloaded scanners).
    pub link: Link,
    /// Both lanes, to be run each on a thread of its own
    /// ([`LaneRun::run`]), watched with its own stall bound.
    pub lanes: [LaneRun; 2],
}

/// Why the claimer could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The facility store refuses this gateway, or is set up so that
    /// claims could be lost ([`FacilityError::needs_technician`]).
    #[error("{0}")]
    Facility(FacilityError),
    /// The database could not record what the connection learned.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Start the claimer as `[redis]` says: connect once (off the async
/// runtime: the redis client blocks) — a facility store that refuses this
/// gateway or is set up so claims could be lost fails the start — record
/// what the connection learned, and make both lanes ready. A store that
/// does not answer yet is no failure: the lanes keep trying. Every
/// round's decisions are logged and counted, and told to the scanners
/// through `signals`.
pub async fn start(
    store: &mut Store,
    gate: Gate,
    cfg: &Config,
    redis: &RedisSettings,
    telemetry: &Telemetry,
    signals: &crate::source::signal::Signals,
) -> Result<Claimer, StartError> {
    let link = Link::new(cfg, redis);
    let (connecting, first) = {
        let link = link.clone();
        tokio::task::spawn_blocking(move || {
            let first = link.connect_checked();
            (link, first)
        })
        .await
        .expect("the connect task does not panic")
    };
    let first = match first {
        Err(e) if e.needs_technician() => return Err(StartError::Facility(e)),
        first => first,
    };
    if let Ok(f) = &first {
        records::set_scanner_clones(store, f.clones())?;
        if let Some(clock) = f.clock() {
            records::set_clock(store, clock)?;
        }
    }
    let observe = {
        let telemetry = telemetry.clone();
        let signals = signals.clone();
        move |decisions: &[Decision]| {
            events::Decided {
                decisions,
                telemetry: &telemetry,
            }
            .emit();
            signals.tell(decisions);
        }
    };
    let (kick, lane_stop, lanes) = lanes(store, gate, connecting, first.ok(), observe)?;
    Ok(Claimer {
        kick,
        lane_stop,
        link,
        lanes,
    })
}

/// The log target of this module's own lines (as when the claimer sat
/// under `daemon`: operators filter on it).
const LINK_TARGET: &str = "scangate::daemon::claimer";

/// The share of the echo window a clock offset must reach to be logged
/// again (and, beyond its bound, warned of).
const CLOCK_WORTH_A_WORD: f64 = 0.05;

/// How to reach the facility store.
#[derive(Clone)]
pub struct Link {
    /// The URL (`url`) and credentials.
    settings: RedisSettings,
    /// The store as logs and `status` name it (the URL without its
    /// password, or the Sentinel service or cluster).
    pub(super) shown: String,
    facility_id: String,
    window: EchoWindow,
    /// How long the facility keeps what it knows.
    pub(super) retention: Duration,
    /// The `[redis]` section.
    pub(super) redis: RedisConfig,
    /// This gateway's id.
    gateway: String,
    /// This gateway's scanners: name, declared `shared` (shared by the
    /// clones: a reload changes them for both lanes' next connect).
    scanners: ScannerList,
    /// The clock offset last logged (by either lane): it is logged again
    /// only when it changes.
    clock_logged: Arc<Mutex<Option<f64>>>,
}

impl Link {
    /// The link `redis` (its secrets already read) describes.
    pub fn new(cfg: &Config, redis: &RedisSettings) -> Link {
        let shown = match &redis.config.service_name {
            Some(service) if redis.config.uses_sentinel() => format!(
                "primary of {service:?} (Sentinel {})",
                redis.config.sentinels.join(", ")
            ),
            _ if redis.config.is_cluster() => format!(
                "primary of slot {} (Redis Cluster {})",
                crate::facility::cluster::facility_slot(&cfg.gateway.facility),
                redis.config.cluster.join(", ")
            ),
            _ => crate::facility::redact(&redis.config.url),
        };
        Link {
            settings: redis.clone(),
            shown,
            facility_id: cfg.gateway.facility.clone(),
            window: cfg.window(),
            retention: cfg.retention(),
            redis: redis.config.clone(),
            gateway: cfg.gateway.id.clone(),
            scanners: Arc::new(Mutex::new(scanner_list(cfg))),
            clock_logged: Arc::default(),
        }
    }

    /// Measure the facility's clock on `f` and log it if it changed by more
    /// than `CLOCK_WORTH_A_WORD` of the window since last logged: a WARN
    /// when this gateway's wall clock is that far off (reads of one label by
    /// two gateways are compared that far apart), else INFO.
    pub fn sample_clock(&self, f: &mut Facility) -> Option<ClockSample> {
        let sample = match f.sample_clock() {
            Ok(s) => s,
            Err(e) => {
                crate::events::ClockMeasureFailed {
                    redis: &self.shown,
                    error: &e,
                }
                .emit();
                return None;
            }
        };
        let worth = self.window.ms() as f64 * CLOCK_WORTH_A_WORD;
        let changed = {
            let mut logged = self
                .clock_logged
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let changed = logged.is_none_or(|l| (l - sample.offset_ms).abs() > worth);
            if changed {
                *logged = Some(sample.offset_ms);
            }
            changed
        };
        if changed {
            crate::events::ClockMeasured {
                redis: &self.shown,
                offset_ms: sample.offset_ms,
                bound_ms: sample.bound_ms,
                worth_ms: worth,
                window_ms: self.window.ms(),
            }
            .emit();
        }
        Some(sample)
    }

    /// Connect and check the server; logs what it found.
    pub fn connect_checked(&self) -> Result<Facility, FacilityError> {
        self.connect_for("start")
    }

    /// [`Link::connect_checked`], the log naming who connects.
    pub(super) fn connect_for(&self, lane: &str) -> Result<Facility, FacilityError> {
        // With Sentinel: whichever server is the primary now (after a
        // failover, the promoted one).
        // (In a Redis Cluster: the primary that owns the facility's slot.)
        let mut f = crate::facility::connect(
            &self.settings,
            &self.facility_id,
            self.window.ms(),
            self.retention,
        )?;
        let info = f.check_server()?;
        crate::events::FacilityConnected {
            redis: &self.shown,
            server: f.server(),
            lane,
            info: &info,
        }
        .emit();
        if info.role == "slave" && (self.redis.uses_sentinel() || self.redis.is_cluster()) {
            // The sentinel (or the slot map) named a node that is (or is
            // again) a replica: it has not seen the failover through yet.
            // Ask again after the back-off.
            return Err(FacilityError::ReadOnly {
                url: f.server().to_string(),
            });
        }
        // WAIT answers within half the command timeout, so a missing replica
        // is reported as such, not as a read timeout. (Not on a replica: it
        // refuses WAIT, as WAITAOF, and every round with it; it writes
        // nothing, and answers decisions it has.)
        let (connected, wanted) = match f.is_replica() {
            true => (0, 0),
            false => (
                info.connected_replicas,
                self.redis.min_replicas_ack.wanted(info.connected_replicas),
            ),
        };
        f.set_min_replicas(wanted, self.redis.command_timeout() / 2);
        f.set_on_disk(info.confirms_on_disk());
        self.log_confirmation(&f, lane, connected);
        if info.role == "slave" {
            crate::events::FacilityWarning::ReadOnlyReplica { redis: &self.shown }.emit();
        }
        if info.appendonly != "yes" {
            crate::events::FacilityWarning::AppendOnlyOff { redis: &self.shown }.emit();
        }
        // (A replica refuses the record as it refuses claims: it is made at
        // the next connect to a primary.)
        if info.role != "slave" {
            let scanners = self
                .scanners
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            match f.register_scanners(&self.gateway, &scanners) {
                Ok(clones) => {
                    for c in &clones {
                        crate::events::FacilityWarning::ScannerClone {
                            redis: &self.shown,
                            scanner: &c.scanner,
                            gateway: &self.gateway,
                            other_gateway: &c.other_gateway,
                        }
                        .emit();
                    }
                    f.set_clones(clones);
                }
                Err(e @ FacilityError::ScannerDiffers { .. }) => return Err(e),
                Err(e) => crate::events::FacilityWarning::ScannersNotRecorded {
                    redis: &self.shown,
                    error: &e,
                }
                .emit(),
            }
        }
        if let Some(clock) = self.sample_clock(&mut f) {
            f.set_clock(clock);
        }
        Ok(f)
    }
}

/// This gateway's scanners, each with whether it is declared `shared`,
/// as a reload last set them: one list for the link and both lanes' gates.
pub(super) type ScannerList = Arc<Mutex<Vec<(String, bool)>>>;

/// `cfg`'s scanners as the facility store records them: name, `shared`.
fn scanner_list(cfg: &Config) -> Vec<(String, bool)> {
    cfg.scanners
        .iter()
        .map(|s| (s.name.clone(), s.shared))
        .collect()
}

impl Link {
    /// This gateway's scanners as a reload last set them.
    pub(super) fn scanners(&self) -> ScannerList {
        Arc::clone(&self.scanners)
    }

    /// The scanners changed (a reload): the next connect of either lane
    /// records these in the facility store (and warns of clones).
    pub fn set_scanners(&self, cfg: &Config) {
        *self.scanners.lock().unwrap_or_else(PoisonError::into_inner) = scanner_list(cfg);
    }

    /// Log what confirms a claim round on `f` (INFO), a WARN when replicas
    /// are connected but none is waited for.
    fn log_confirmation(&self, f: &Facility, lane: &str, connected: u32) {
        let (wanted, on_disk) = (f.min_replicas(), f.on_disk());
        let disk = match on_disk {
            true => " and the primary has written them to its append-only file (WAITAOF)",
            false => "",
        };
        if wanted == 0 && connected > 0 {
            crate::events::Confirmation::Unwaited {
                redis: &self.shown,
                lane,
                connected,
            }
            .emit();
        } else if wanted == 0 {
            crate::events::Confirmation::PrimaryOnly {
                redis: &self.shown,
                lane,
                disk,
            }
            .emit();
        } else {
            crate::events::Confirmation::Replicas {
                redis: &self.shown,
                lane,
                connected,
                wanted,
                disk,
            }
            .emit();
        }
    }

    /// With `min_replicas_ack = "auto"`: read again how many replicas the
    /// primary reports connected and wait for that many from now on (logged
    /// when it changes). A failed read is left to the next claim round.
    pub fn refresh_confirmation(&self, f: &mut Facility, lane: &str) {
        if self.redis.min_replicas_ack != ReplicaAck::Auto || f.is_replica() {
            return;
        }
        match f.connected_replicas() {
            Ok(n) if n != f.min_replicas() => {
                let before = f.min_replicas();
                f.set_min_replicas(n, self.redis.command_timeout() / 2);
                if n < before {
                    crate::events::Confirmation::ReplicasLeft {
                        redis: &self.shown,
                        lane,
                        now: n,
                        before,
                    }
                    .emit();
                }
                self.log_confirmation(f, lane, n);
            }
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(target: LINK_TARGET, redis = %self.shown, "reading the facility Redis's replicas failed: {e}")
            }
        }
    }
}
