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

use crate::config::Config;
use crate::facility::config::{RedisConfig, RedisSettings};
use crate::facility::{Facility, FacilityError, Sent};
use crate::gate::facility::{Lane, Picked};
use crate::gate::{Decision, Gate, GateStats, Verdict};
use crate::outbox::FacilityState;
use crate::store::{Store, StoreError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// How often scans held for an unsynchronised clock are looked at again.
const CLOCK_POLL: Duration = Duration::from_secs(1);

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
    /// The link `redis` (its secrets already read) describes.
    pub fn new(cfg: &Config, redis: &RedisSettings) -> Link {
        Link {
            url: redis.url(),
            ca_pem: redis.ca_pem.clone(),
            shown: crate::facility::redact(&redis.config.url),
            facility: cfg.gateway.facility.clone(),
            window_ms: cfg.window_ms(),
            retention: Duration::from_secs(cfg.dedup.retention_hours * 3600),
            redis: redis.config.clone(),
        }
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

/// The failure as the reason logged and audited; a refusal of this
/// gateway's settings also sets `refused`.
fn noted(e: FacilityError, refused: &mut bool) -> String {
    if matches!(e, FacilityError::SettingsDiffer { .. }) {
        *refused = true;
    }
    e.to_string()
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
    /// Per lane ([`Lanes::me`]): it may hold scans back behind the other
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
        let lanes = Lanes {
            lane: Lane::Replay,
            wake: released,
            other: kick.clone(),
            between: Arc::clone(&between),
        };
        let gone = ReplayGone(kick.clone());
        lane_thread(gone, store, gate, link, None, lanes, observe.clone())
    };
    let live = {
        let store = store.companion()?;
        let lanes = Lanes {
            lane: Lane::Live,
            wake: kicked,
            other: release,
            between,
        };
        lane_thread(while_live, store, gate, link, first, lanes, observe)
    };
    Ok((Kicker(kick), Claimers { live, replay }))
}

/// A lane's thread (named after it), holding `guard` until it ends.
fn lane_thread(
    guard: impl Send + 'static,
    store: Store,
    gate: Gate,
    link: Link,
    first: Option<Facility>,
    lanes: Lanes,
    observe: impl Fn(&[Decision]) + Send + 'static,
) -> JoinHandle<GateStats> {
    std::thread::Builder::new()
        .name(format!("claimer-{}", lanes.name()))
        .spawn(move || {
            let _guard = guard;
            run(store, gate, link, first, lanes, observe)
        })
        .expect("spawning a thread")
}

/// A lane's place among the two.
struct Lanes {
    lane: Lane,
    /// What wakes this lane: the writer's kicks and the replay's releases
    /// (live), the live lane's new unresolved scans (replay).
    wake: Receiver<Wake>,
    /// Wakes the other lane.
    other: Sender<Wake>,
    between: Arc<Between>,
}

impl Lanes {
    /// What woke this lane: only what is queued if `go_on`, else waiting
    /// up to `wait()` for the first. A lane nobody can wake any more
    /// (the writer or the live lane is gone) stops.
    fn woken(&self, go_on: bool, wait: impl FnOnce() -> Duration) -> Vec<Wake> {
        let first = if go_on {
            self.wake
                .try_recv()
                .map_err(|e| matches!(e, TryRecvError::Disconnected))
        } else {
            self.wake
                .recv_timeout(wait())
                .map_err(|e| matches!(e, RecvTimeoutError::Disconnected))
        };
        match first {
            Ok(w) => std::iter::once(w).chain(self.wake.try_iter()).collect(),
            Err(true) => vec![Wake::Stop],
            Err(false) => Vec::new(),
        }
    }

    /// This lane's index in [`Between`]'s arrays, and the other's.
    fn me(&self) -> (usize, usize) {
        match self.lane {
            Lane::Live => (0, 1),
            Lane::Replay => (1, 0),
        }
    }

    fn name(&self) -> &'static str {
        match self.lane {
            Lane::Live => "live",
            Lane::Replay => "replay",
        }
    }
}

/// A lane's loop; returns its gate's counters when the writer is gone.
/// `observe` sees every round's recorded decisions.
///
/// Rounds are pipelined: while Redis runs round k's claims, this thread
/// picks round k+1 and then writes round k-1's verdicts, so the gateway's
/// SQLite work and Redis's script work overlap. Round k+1 is sent only after
/// round k is answered, so a failure never lets a later claim overtake an
/// earlier one.
fn run(
    mut store: Store,
    mut gate: Gate,
    link: Link,
    mut facility: Option<Facility>,
    lanes: Lanes,
    observe: impl Fn(&[Decision]),
) -> GateStats {
    let lane = lanes.lane;
    let name = lanes.name();
    let (me, other) = lanes.me();
    let between = Arc::clone(&lanes.between);
    gate.set_require_synced_clock(link.redis.require_synced_clock);
    let mut backoff = BACKOFF_MIN;
    // The local database's own back-off (a full or failing disk): no round
    // is sent while it runs, so a failing write is not retried — nor its
    // claims re-sent to Redis — at full speed.
    let mut db_backoff = BACKOFF_MIN;
    let mut db_retry_at = Instant::now();
    let mut retry_at = Instant::now();
    let mut offline_reason = String::from("facility Redis not connected yet");
    let mut outage_since: Option<Instant> = None;
    let mut stopping = false;
    let mut last_round_sent = false;
    let mut in_flight: Option<(Picked, Sent)> = None;
    // The facility refused this gateway's window and retention: its own
    // window is not the facility's rule, so it decides no echo by itself
    // until a connection's check finds the settings agree again.
    let mut settings_refused = false;
    let mut outage_since_ms = 0;
    loop {
        // The replay lane connects only for a backlog: an idle gateway
        // does not poll a Redis that is down twice.
        let mut connect_failed = false;
        if facility.is_none()
            && in_flight.is_none()
            && Instant::now() >= retry_at
            && (lane == Lane::Live || gate.has_backlog(&store).unwrap_or(true))
        {
            match link.connect_for(name) {
                Ok(f) => {
                    facility = Some(f);
                    settings_refused = false;
                }
                Err(e) => {
                    offline_reason = noted(e, &mut settings_refused);
                    connect_failed = true;
                }
            }
        }
        gate.set_local_echoes(!settings_refused);
        let skip: Vec<i64> = in_flight
            .as_ref()
            .map(|(p, _)| p.seqs().collect())
            .unwrap_or_default();
        let now = crate::capture::CaptureTime::now();
        let online = facility.is_some();
        between.held[me].store(true, Ordering::SeqCst);
        let next = gate
            .pick(&mut store, lane, &skip, &now, online)
            .inspect_err(|e| {
                tracing::error!(
                    lane = name,
                    "reading open scans failed on the local database: {e}; retrying in {db_backoff:?}"
                );
            })
            .ok();
        let mut db_failed = next.is_none();
        let more = next.as_ref().is_some_and(|p| p.more());
        // (Scans held back are open: a pick that held them all is no sign
        // that the facility store answers.)
        let nothing_open = next.as_ref().is_some_and(|p| p.is_empty() && p.held() == 0);
        // Read once per pass: the send below and the wait at the end must
        // agree on whether the local back-off still runs.
        let db_held = Instant::now() < db_retry_at;
        let waiting_for_clock = next.as_ref().map_or(0, Picked::waiting_for_clock);
        let held = next.as_ref().map_or(0, Picked::held);
        between.held[me].store(held > 0, Ordering::SeqCst);

        // 1. The round in flight: its answers.
        let answered = in_flight.take().map(|(mut picked, sent)| {
            let claimed = match facility.as_mut() {
                Some(f) => f
                    .recv_claims(sent)
                    .map_err(|e| noted(e, &mut settings_refused)),
                None => Err(offline_reason.clone()),
            };
            if claimed.is_err() && settings_refused {
                // Picked before the refusal was known: its echoes were
                // judged by a window that is not the facility's. (Only on
                // a failed claim: answers match the scans claimed.)
                picked.withdraw_local_echoes();
            }
            (picked, claimed)
        });
        let mut failure = answered
            .as_ref()
            .and_then(|(_, c)| c.as_ref().err().cloned());
        let answered_ok = answered.as_ref().is_some_and(|(_, c)| c.is_ok());
        // 2. The next round goes out now, so Redis runs it while step 3
        //    writes the answered one. After a failure it waits: picked again
        //    after the back-off, in capture order.
        let mut unclaimed = None;
        let may_send = failure.is_none() && !(stopping && last_round_sent) && !db_held;
        if let Some(mut next) = next.filter(|p| !p.is_empty() && may_send) {
            last_round_sent = stopping;
            let claims = next.claims(gate.gateway());
            // A round of local verdicts alone sends no claim that would
            // tell of a facility-wide change of window: before this
            // gateway's window decides echoes, ask (one HMGET).
            let checked = match facility.as_mut() {
                Some(f) if claims.is_empty() && next.has_local_echoes() => f.check_settings(),
                _ => Ok(()),
            };
            if let Err(e) = checked {
                let reason = noted(e, &mut settings_refused);
                if settings_refused {
                    next.withdraw_local_echoes();
                }
                failure = Some(reason.clone());
                unclaimed = Some((next, Err(reason)));
            } else if claims.is_empty() {
                unclaimed = Some((next, Ok(Vec::new())));
            } else {
                match facility.as_mut() {
                    Some(f) => match f.send_claims(&claims) {
                        Ok(sent) => in_flight = Some((next, sent)),
                        Err(e) => {
                            failure = Some(e.to_string());
                            unclaimed = Some((next, Err(e.to_string())));
                        }
                    },
                    None => unclaimed = Some((next, Err(offline_reason.clone()))),
                }
            }
        }
        // 3. Write the verdicts.
        let mut recorded = false;
        let mut wake_other = false;
        for (picked, claimed) in answered.into_iter().chain(unclaimed) {
            match gate.record(&mut store, picked, claimed) {
                Ok(round) => {
                    recorded = true;
                    observe(&round.decisions);
                    if round.decisions.is_empty() {
                        continue;
                    }
                    // A decided scan may free scans the other lane holds
                    // back; new unresolved scans are the replay's.
                    wake_other |= between.held[other].load(Ordering::SeqCst)
                        || (lane == Lane::Live
                            && round
                                .decisions
                                .iter()
                                .any(|d| matches!(d.verdict, Verdict::Unresolved { .. })));
                }
                Err(e) => {
                    // The rows stay open; their claims are idempotent.
                    tracing::error!(
                        lane = name,
                        "writing verdicts failed on the local database: {e}; retrying in {db_backoff:?}"
                    );
                    db_failed = true;
                }
            }
        }
        if wake_other {
            // (Gone only at shutdown, or after a panic that
            // [`Wake::ReplayGone`] reports.)
            let _ = lanes.other.send(Wake::Scans);
        }

        // Outage bookkeeping: a failed claim, or a failed connect attempt.
        // The outage ends when claims are answered (or none wait), not when
        // a connection opens: a server that accepts connections but refuses
        // claims (full, read-only replica) must not be retried at once.
        let attempt_failed = match failure {
            Some(reason) => {
                facility = None; // reconnect after the back-off
                offline_reason = reason;
                true
            }
            None => connect_failed,
        };
        let recovered = facility.is_some() && (answered_ok || nothing_open);
        if attempt_failed {
            if outage_since.is_none() {
                tracing::warn!(
                    redis = %link.shown, lane = name,
                    "facility Redis unavailable: {offline_reason}. Scans are kept in the outbox as unresolved and replayed in capture order when it answers"
                );
                outage_since = Some(Instant::now());
                outage_since_ms = chrono::Utc::now().timestamp_millis();
            } else if lane == Lane::Replay {
                // (The replay lane retries on a timer and says so; the
                // live lane only on new scans, which wait with the rest.)
                log_backlog(&store, &link.shown, &offline_reason, backoff);
            } else {
                tracing::debug!(redis = %link.shown, lane = name, "facility Redis still unavailable: {offline_reason}");
            }
            publish(
                &mut store,
                &between.shown,
                false,
                Some(&offline_reason),
                outage_since_ms,
            );
            retry_at = Instant::now() + backoff;
            backoff = (backoff * 2).min(BACKOFF_MAX);
        } else if recovered {
            if let Some(since) = outage_since.take() {
                let _ = lanes.other.send(Wake::Answering);
                let doing = match lane {
                    Lane::Live => "new scans are claimed as they come",
                    Lane::Replay => "unresolved scans are being replayed",
                };
                tracing::info!(
                    redis = %link.shown, lane = name,
                    outage_s = since.elapsed().as_secs(),
                    "facility Redis answers again; {doing}"
                );
            }
            backoff = BACKOFF_MIN;
            let now_ms = chrono::Utc::now().timestamp_millis();
            publish(&mut store, &between.shown, true, None, now_ms);
        }

        if db_failed {
            db_retry_at = Instant::now() + db_backoff;
            db_backoff = (db_backoff * 2).min(BACKOFF_MAX);
        } else if recorded {
            db_backoff = BACKOFF_MIN;
        }

        // While the local back-off runs, more backlog is no reason to go
        // again: the round would only be picked and held back once more.
        let db_wait = db_failed || db_held;
        // Answers to read, or more backlog: at once (a stop is still heard:
        // a replay of an hour's backlog must not outlast the stop timeout).
        let go_on = in_flight.is_some() || (more && !db_wait && !stopping);
        if !go_on && stopping {
            // Shutdown: one last attempt was made; what is left stays durable.
            break;
        }
        let woken = lanes.woken(go_on, || {
            // Offline, the live lane waits for new scans (each kick after
            // the back-off tries a connection); the replay lane retries
            // while a backlog waits. Otherwise: until kicked.
            let retrying = facility.is_none()
                && lane == Lane::Replay
                && gate.has_backlog(&store).unwrap_or(true);
            let mut wait = if retrying {
                retry_at.saturating_duration_since(Instant::now())
            } else {
                Duration::from_secs(3600)
            };
            // Refused local writes are retried when their back-off ends,
            // also when a kick woke this loop in the meantime (0 if it
            // just ended).
            if db_wait {
                wait = wait.min(db_retry_at.saturating_duration_since(Instant::now()));
            }
            if waiting_for_clock > 0 {
                wait = wait.min(CLOCK_POLL); // look again soon: NTP may have synced
            }
            wait
        });
        for w in woken {
            match w {
                Wake::Scans => {}
                Wake::Answering => {
                    retry_at = Instant::now();
                    backoff = BACKOFF_MIN;
                }
                Wake::Stop => {
                    stopping = true;
                    retry_at = Instant::now(); // one last attempt
                }
                Wake::ReplayGone => {
                    // Stop, so the writer stops and the service restarts;
                    // the scans stay durable in the outbox.
                    tracing::error!("the claimer's replay lane stopped unexpectedly; stopping");
                    return gate.stats();
                }
            }
        }
    }
    gate.stats()
}
