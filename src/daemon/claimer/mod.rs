//! The facility claimer (`[redis]` configured): decides the scans the
//! outbox writer made durable, through the facility store, in capture order.
//!
//! Two lanes, one thread each ([`lanes`]), each with its own SQLite
//! connection, Redis connection and gate ([`Gate::lane`]: one Bloom filter):
//! the **live** lane claims new scans the moment the writer kicks it, and
//! the **replay** lane works through the `unresolved` backlog an outage
//! left, oldest first — so a pick at the counter is never queued behind a
//! round of an hour's backlog (docs/design.md, "Two lanes"). The redis
//! client is blocking, so it lives on these threads, never on the async
//! runtime. While Redis is unreachable, the live lane only makes local
//! verdicts and marks new scans `unresolved`, and both wait with capped
//! back-off (no busy loop); new scans are still admitted and ACKed by the
//! writer meanwhile. Stopped ([`LaneStop`], after the writer is done), each
//! lane runs one last round.

mod lane;
mod reconcile;
pub mod records;

/// The share of the echo window a clock offset must reach to be logged
/// again (and, beyond its bound, warned of).
const CLOCK_WORTH_A_WORD: f64 = 0.05;

pub use lane::{pick, record, round};
pub use reconcile::{REPUBLISH_ROUND, markers};

use crate::config::Config;
use crate::events::Event as _;
use crate::facility::config::{RedisConfig, RedisSettings, ReplicaAck};
use crate::facility::{Facility, FacilityError};
use crate::gate::Gate;
use crate::gate::facility::LaneKind;
use crate::model::ClockSample;
use crate::model::FacilityState;
use crate::model::{Decision, GateStats};
use crate::notify::Progress;
use crate::outbox::admitted::{Admitted, Cached};
use crate::store::handoff::Desk;
use crate::store::{Store, StoreError};
use lane::{Lane, Next};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How to reach the facility store.
#[derive(Clone)]
pub struct Link {
    /// The URL (`url`) and credentials.
    settings: RedisSettings,
    shown: String,
    facility_id: String,
    window_ms: i64,
    retention: Duration,
    redis: RedisConfig,
    /// This gateway's id.
    gateway: String,
    /// This gateway's scanners: name, declared `shared` (shared by the
    /// clones: a reload changes them for both lanes' next connect).
    scanners: Arc<Mutex<Vec<(String, bool)>>>,
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
            window_ms: cfg.window_ms(),
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
        let worth = self.window_ms as f64 * CLOCK_WORTH_A_WORD;
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
                window_ms: self.window_ms,
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
    fn connect_for(&self, lane: &str) -> Result<Facility, FacilityError> {
        // With Sentinel: whichever server is the primary now (after a
        // failover, the promoted one).
        // (In a Redis Cluster: the primary that owns the facility's slot.)
        let mut f = crate::facility::connect(
            &self.settings,
            &self.facility_id,
            self.window_ms,
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

/// `cfg`'s scanners as the facility store records them: name, `shared`.
fn scanner_list(cfg: &Config) -> Vec<(String, bool)> {
    cfg.scanners
        .iter()
        .map(|s| (s.name.clone(), s.shared))
        .collect()
}

impl Link {
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
                tracing::debug!(redis = %self.shown, "reading the facility Redis's replicas failed: {e}")
            }
        }
    }
}

/// How many scans wait for the facility store and how old the oldest is
/// (seconds), for the replay lane's retries.
fn backlog(store: &Store) -> Result<(i64, i64), String> {
    let (waiting, oldest) = store.backlog().map_err(|e| e.to_string())?;
    let oldest_s = oldest.map_or(0, |ms| {
        (chrono::Utc::now().timestamp_millis() - ms).max(0) / 1000
    });
    Ok((waiting, oldest_s))
}

/// Record for `outbox status` whether the facility store answers, if that
/// (or the reason it does not) changed since either lane last wrote it.
fn publish(
    store: &mut Store,
    shown: &Mutex<Option<FacilityState>>,
    answering: bool,
    reason: Option<&str>,
    since_ms: i64,
) {
    let state = FacilityState {
        answering,
        since_ms,
        reason: reason.map(str::to_string),
    };
    {
        // Not held across the write, which waits for the writers' turn.
        let mut shown = shown.lock().unwrap_or_else(PoisonError::into_inner);
        if shown
            .as_ref()
            .is_some_and(|s| s.answering == answering && s.reason.as_deref() == reason)
        {
            return;
        }
        *shown = Some(state.clone());
    }
    if let Err(e) = records::set_state(store, &state) {
        crate::events::RecordingFailed {
            what: crate::events::Recording::FacilityState,
            error: &e,
        }
        .emit();
        // Written again at the next observation.
        *shown.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

/// Why a lane wakes.
enum Wake {
    /// New scans were admitted, or the other lane changed what is open.
    Scans,
    /// The other lane's claims are answered again after an outage: retry
    /// now, not when this lane's own back-off ends.
    Answering,
    /// The daemon stops the claimer (after the outbox writer is done):
    /// one last round, then end.
    Stop,
}

/// What the two lanes tell each other without a wake-up.
#[derive(Default)]
struct Between {
    /// Per lane (live 0, replay 1): it may hold scans back behind the other
    /// lane's, which wakes it after each round it records. Set before
    /// every pick and cleared after one that held nothing, so a round
    /// recorded while a pick reads is never missed.
    held: [AtomicBool; 2],
    /// What `outbox status` shows of the facility store, as last written by
    /// either lane (the latest observation wins).
    shown: Mutex<Option<FacilityState>>,
    /// Held by a lane while it reconciles (the facility store lost data),
    /// and by each lane while it sends claims: no new scan is claimed until
    /// this gateway's commits are re-published.
    reconciling: Mutex<()>,
}

/// The writer's side of the claimer: kicks the live lane for each admitted
/// batch, and takes both lanes' verdicts into its transactions.
pub struct Kicker(Sender<Wake>, Progress, Desk, Arc<Admitted>);

impl Kicker {
    /// The lanes' verdicts, handed to the writer's next transaction
    /// ([`crate::store::handoff`]): the writer must run them (beside its
    /// admits, or alone) and, when it ends, close the desk.
    pub fn desk(&self) -> &Desk {
        &self.2
    }

    /// Where the writer hands the rows it made durable, for the live lane
    /// to take instead of reading them back ([`Admitted`]).
    pub fn admitted(&self) -> &Admitted {
        &self.3
    }

    /// Wake the live lane; `false` if it is gone (nobody would decide the
    /// scans: the caller stops, so the service restarts).
    pub fn kick(&self) -> bool {
        self.1.offer();
        self.0.send(Wake::Scans).is_ok()
    }
}

/// Stops the lanes: each makes one last round and ends. The daemon's
/// stop order stops the live lane once the outbox writer is done, and the
/// replay lane once the live lane has ended, so the live lane's last round
/// can still free backlog scans held back behind it. Dropped, it stops any
/// lane not stopped yet (an early return must not leave the two waiting
/// for each other).
pub struct LaneStop {
    live: Option<Sender<Wake>>,
    replay: Option<Sender<Wake>>,
}

impl LaneStop {
    /// Tell the lane of `kind` to stop (once; a lane already gone needs no
    /// stop).
    pub fn stop(&mut self, kind: LaneKind) {
        let lane = match kind {
            LaneKind::Live => self.live.take(),
            LaneKind::Replay => self.replay.take(),
        };
        if let Some(lane) = lane {
            let _ = lane.send(Wake::Stop);
        }
    }
}

impl Drop for LaneStop {
    fn drop(&mut self) {
        self.stop(LaneKind::Live);
        self.stop(LaneKind::Replay);
    }
}

/// Sees every round's recorded decisions (the daemon logs them; the
/// benchmark times them).
type Observer = Box<dyn Fn(&[Decision]) + Send>;

/// One lane, ready to run on a thread of its own ([`LaneRun::run`]).
pub struct LaneRun {
    lane: Lane,
    peers: Peers,
    observe: Observer,
    progress: Progress,
}

impl LaneRun {
    /// Which lane.
    pub fn kind(&self) -> LaneKind {
        self.lane.kind()
    }

    /// The name of its thread.
    pub fn thread_name(&self) -> String {
        format!("claimer-{}", self.lane.name())
    }

    /// Its progress, for the watchdog: each pass is a turn; a kick or a
    /// wake-up from the other lane is work offered.
    pub fn progress(&self) -> Progress {
        self.progress.clone()
    }

    /// How long one pass may take before the watchdog calls the lane
    /// wedged, at least: a pass waits at most for a connect and a few
    /// commands, each bounded by `[redis]` `connect_timeout_ms` and
    /// `command_timeout_ms` (a Redis that is down or paused makes passes
    /// that fail within these, not a wedge).
    pub fn stall_bound(&self) -> Duration {
        let r = &self.lane.link().redis;
        (r.connect_timeout() + r.command_timeout()) * 2
    }

    /// Run the lane until it is stopped ([`LaneStop`]) or nobody can wake
    /// it any more; its gate's counters.
    pub fn run(self) -> GateStats {
        run(self.lane, self.peers, self.observe, &self.progress)
    }
}

/// Both lanes over companions of `store`, to be run on their own threads.
/// `first` is the start-up connection (the live lane takes it; the replay
/// lane connects when a backlog waits). `observe` sees every round's
/// recorded decisions, from either thread (the daemon logs them; the
/// benchmark times them).
pub fn lanes(
    store: &Store,
    gate: Gate,
    link: Link,
    first: Option<Facility>,
    observe: impl Fn(&[Decision]) + Send + Clone + 'static,
) -> Result<(Kicker, LaneStop, [LaneRun; 2]), StoreError> {
    let (kick, kicked) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel();
    let stop = LaneStop {
        live: Some(kick.clone()),
        replay: Some(release.clone()),
    };
    let between = Arc::new(Between::default());
    let (handoff, desk) = crate::store::handoff::handoff();
    let admitted = Arc::new(Admitted::default());
    let live_progress = Progress::new("facility claimer's live lane");
    let replay_progress = Progress::new("facility claimer's replay lane");
    // The backlog gives way to the counter at the writers' turn: the
    // replay lane writes its rounds itself (handed to the writer, they
    // cost its reads their page cache and a thread handoff per round, for
    // nothing measured: docs/benchmarks.md); the live lane's ride with the
    // writer's admits.
    let (replay_store, replay_gate) = (store.companion()?.yielding(), gate.lane());
    let replay = LaneRun {
        lane: Lane::new(
            LaneKind::Replay,
            replay_store,
            replay_gate,
            link.clone(),
            None,
            between.clone(),
            replay_progress.clone(),
        ),
        peers: Peers {
            wake: released,
            other: kick.clone(),
            other_progress: live_progress.clone(),
        },
        observe: Box::new(observe.clone()),
        progress: replay_progress.clone(),
    };
    let live = LaneRun {
        lane: Lane::new(
            LaneKind::Live,
            store.companion()?,
            gate.with_admitted(Cached::new(admitted.clone())),
            link,
            first,
            between,
            live_progress.clone(),
        )
        .with_handoff(handoff),
        peers: Peers {
            wake: kicked,
            other: release,
            other_progress: replay_progress,
        },
        observe: Box::new(observe),
        progress: live_progress.clone(),
    };
    Ok((
        Kicker(kick, live_progress, desk, admitted),
        stop,
        [live, replay],
    ))
}

/// How a lane is woken, and how it wakes the other.
struct Peers {
    /// What wakes this lane: the writer's kicks and the replay's releases
    /// (live), the live lane's new unresolved scans (replay).
    wake: Receiver<Wake>,
    /// Wakes the other lane.
    other: Sender<Wake>,
    /// The other lane's progress (a wake-up is work offered to it).
    other_progress: Progress,
}

impl Peers {
    /// Wake the other lane (gone only at shutdown, or after a panic the
    /// supervisor hears).
    fn wake_other(&self, wake: Wake) {
        self.other_progress.offer();
        let _ = self.other.send(wake);
    }

    /// What woke this lane: only what is queued if `wait` is `None`, else
    /// waiting up to `wait` for the first. A lane nobody can wake any more
    /// (the writer or the live lane is gone) stops.
    fn woken(&self, wait: Option<Duration>) -> Vec<Wake> {
        let first = match wait {
            None => self
                .wake
                .try_recv()
                .map_err(|e| matches!(e, TryRecvError::Disconnected)),
            Some(wait) => self
                .wake
                .recv_timeout(wait)
                .map_err(|e| matches!(e, RecvTimeoutError::Disconnected)),
        };
        match first {
            Ok(w) => std::iter::once(w).chain(self.wake.try_iter()).collect(),
            Err(true) => vec![Wake::Stop],
            Err(false) => Vec::new(),
        }
    }
}

/// A lane's thread: passes ([`Lane::pass`]) until it ends; returns its
/// gate's counters. `observe` sees every round's recorded decisions.
fn run(
    mut lane: Lane,
    peers: Peers,
    observe: impl Fn(&[Decision]),
    progress: &Progress,
) -> GateStats {
    loop {
        let next = {
            let _turn = progress.turn();
            progress.take_offers();
            lane.pass(&peers, &observe)
        };
        let wait = match next {
            Next::End => return lane.stats(),
            Next::Now => None,
            Next::Wait(wait) => Some(wait),
        };
        for wake in peers.woken(wait) {
            lane.woken(&wake);
        }
    }
}
