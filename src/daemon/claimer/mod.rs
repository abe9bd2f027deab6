//! The facility claimer (`[redis]` configured): decides the scans the
//! outbox writer made durable, through the facility store, in capture order.
//!
//! Two lanes, one thread each ([`spawn`]), each with its own SQLite
//! connection, Redis connection and gate ([`Gate::lane`]: one Bloom filter):
//! the **live** lane claims new scans the moment the writer kicks it, and
//! the **replay** lane works through the `unresolved` backlog an outage
//! left, oldest first — so a pick at the counter is never queued behind a
//! round of an hour's backlog (docs/design.md, "Two lanes"). The redis
//! client is blocking, so it lives on these threads, never on the async
//! runtime. While Redis is unreachable, the live lane only makes local
//! verdicts and marks new scans `unresolved`, and both wait with capped
//! back-off (no busy loop); new scans are still admitted and ACKed by the
//! writer meanwhile. When the writer stops (its [`Kicker`] is dropped), each
//! lane runs one last round.

mod lane;

pub use lane::{pick, record, round};

use crate::config::Config;
use crate::facility::config::RedisConfig;
use crate::facility::{Facility, FacilityError};
use crate::gate::facility::LaneKind;
use crate::gate::{Decision, Gate, GateStats};
use crate::outbox::FacilityState;
use crate::store::{Store, StoreError};
use lane::{Lane, Next};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// How to reach the facility store.
#[derive(Clone)]
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
        self.connect_for("start")
    }

    /// [`Link::connect_checked`], the log naming who connects.
    fn connect_for(&self, lane: &str) -> Result<Facility, FacilityError> {
        let mut f = Facility::connect_with_ca(
            &self.url,
            self.ca_pem.clone(),
            &self.facility,
            self.window_ms,
            self.retention,
            self.redis.connect_timeout(),
            self.redis.command_timeout(),
        )?;
        // WAIT answers within half the command timeout, so a missing replica
        // is reported as such, not as a read timeout.
        f.set_min_replicas(
            self.redis.min_replicas_ack,
            self.redis.command_timeout() / 2,
        );
        let info = f.check_server()?;
        tracing::info!(
            redis = %self.shown, lane, version = %info.version, maxmemory_policy = %info.maxmemory_policy,
            appendonly = %info.appendonly, save = %info.save, role = %info.role,
            "facility Redis connected"
        );
        if info.role == "slave" {
            tracing::warn!(
                redis = %self.shown,
                "facility Redis is a read-only replica of another server: it refuses claims, so scans wait in the outbox until it is promoted. Point [redis] url at the primary"
            );
        }
        if info.appendonly != "yes" {
            tracing::warn!(
                redis = %self.shown,
                "facility Redis has appendonly off: a Redis crash can lose recent claims; this gateway still suppresses echoes of its own commits"
            );
        }
        Ok(f)
    }
}

/// Log how many scans wait, how old the oldest is, and when the next attempt
/// is (each failed retry).
fn log_backlog(store: &Store, shown: &str, reason: &str, next: Duration) {
    match store.backlog() {
        Ok((waiting, oldest)) => {
            let oldest_s = oldest.map_or(0, |ms| {
                (chrono::Utc::now().timestamp_millis() - ms).max(0) / 1000
            });
            tracing::warn!(
                redis = %shown, waiting, oldest_s,
                "facility Redis still unavailable: {reason}. {waiting} scans wait in the outbox, the oldest captured {oldest_s} s ago; next attempt in {next:?}"
            );
        }
        Err(e) => {
            tracing::warn!(redis = %shown, "facility Redis still unavailable: {reason} (backlog unknown: {e}); next attempt in {next:?}")
        }
    }
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
    if let Err(e) = store.set_facility_state(&state) {
        tracing::warn!("recording the facility store's state for `outbox status` failed: {e}");
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
    /// The outbox writer is gone: one last round, then stop.
    Stop,
    /// The replay lane's thread ended while the live lane ran (it
    /// panicked): nobody would replay the backlog, nor free the new scans
    /// held back behind it.
    ReplayGone,
}

/// Sends [`Wake::ReplayGone`] when the replay lane's thread ends, however.
struct ReplayGone(Sender<Wake>);

impl Drop for ReplayGone {
    fn drop(&mut self) {
        let _ = self.0.send(Wake::ReplayGone);
    }
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
}

/// The writer's side of the live lane: kicks it for each admitted batch;
/// dropped (the writer returned or unwound), it tells the lanes to stop.
pub struct Kicker(Sender<Wake>);

impl Kicker {
    /// Wake the live lane; `false` if it is gone (nobody would decide the
    /// scans: the caller stops, so the service restarts).
    pub fn kick(&self) -> bool {
        self.0.send(Wake::Scans).is_ok()
    }
}

impl Drop for Kicker {
    fn drop(&mut self) {
        let _ = self.0.send(Wake::Stop);
    }
}

/// The two lanes' threads.
pub struct Claimers {
    live: JoinHandle<GateStats>,
    replay: JoinHandle<GateStats>,
}

impl Claimers {
    /// Wait for both lanes to end (after the [`Kicker`] is dropped); their
    /// counters added, or `None` if a lane panicked.
    pub fn join(self) -> Option<GateStats> {
        let live = self.live.join().ok();
        let replay = self.replay.join().ok();
        Some(live?.plus(&replay?))
    }
}

/// Start both lanes over companions of `store`. `first` is the start-up
/// connection (the live lane takes it; the replay lane connects when a
/// backlog waits). `observe` sees every round's recorded decisions, from
/// either thread (the daemon logs them; the benchmark times them).
/// `while_live` is dropped when the live lane ends, however (the daemon
/// passes a sender that tells it so).
pub fn spawn(
    store: &Store,
    gate: Gate,
    link: Link,
    first: Option<Facility>,
    observe: impl Fn(&[Decision]) + Send + Clone + 'static,
    while_live: impl Send + 'static,
) -> Result<(Kicker, Claimers), StoreError> {
    let (kick, kicked) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel();
    let between = Arc::new(Between::default());
    let replay = {
        // The backlog gives way to the counter at the writers' turn.
        let (store, gate, link) = (store.companion()?.yielding(), gate.lane(), link.clone());
        let lane = Lane::new(LaneKind::Replay, store, gate, link, None, between.clone());
        let peers = Peers {
            wake: released,
            other: kick.clone(),
        };
        let gone = ReplayGone(kick.clone());
        lane_thread(gone, lane, peers, observe.clone())
    };
    let live = {
        let lane = Lane::new(
            LaneKind::Live,
            store.companion()?,
            gate,
            link,
            first,
            between,
        );
        let peers = Peers {
            wake: kicked,
            other: release,
        };
        lane_thread(while_live, lane, peers, observe)
    };
    Ok((Kicker(kick), Claimers { live, replay }))
}

/// A lane's thread (named after it), holding `guard` until it ends.
fn lane_thread(
    guard: impl Send + 'static,
    lane: Lane,
    peers: Peers,
    observe: impl Fn(&[Decision]) + Send + 'static,
) -> JoinHandle<GateStats> {
    std::thread::Builder::new()
        .name(format!("claimer-{}", lane.name()))
        .spawn(move || {
            let _guard = guard;
            run(lane, peers, observe)
        })
        .expect("spawning a thread")
}

/// How a lane is woken, and how it wakes the other.
struct Peers {
    /// What wakes this lane: the writer's kicks and the replay's releases
    /// (live), the live lane's new unresolved scans (replay).
    wake: Receiver<Wake>,
    /// Wakes the other lane.
    other: Sender<Wake>,
}

impl Peers {
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
fn run(mut lane: Lane, peers: Peers, observe: impl Fn(&[Decision])) -> GateStats {
    loop {
        let wait = match lane.pass(&peers, &observe) {
            Next::End => return lane.stats(),
            Next::Now => None,
            Next::Wait(wait) => Some(wait),
        };
        for wake in peers.woken(wait) {
            if matches!(wake, Wake::ReplayGone) {
                // Stop, so the writer stops and the service restarts; the
                // scans stay durable in the outbox.
                tracing::error!("the claimer's replay lane stopped unexpectedly; stopping");
                return lane.stats();
            }
            lane.woken(&wake);
        }
    }
}
