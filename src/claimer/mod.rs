//! The facility claimer (`[redis]` configured): decides the scans the
//! outbox writer made durable, through the facility store, in capture order.
//!
//! Two lanes, one thread each ([`lanes`]), each with its own SQLite
//! connection, Redis connection and gate ([`FacilityGate::lane`]: one Bloom filter):
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

mod claims;
mod facility_gate;
mod facility_time;
mod lane;
mod link;
mod reconcile;
pub(crate) mod records;

pub use claims::{AHEAD, LaneKind, Picked, ROUND, Round, claim_for};
pub use facility_gate::FacilityGate;
pub use lane::{pick, record, round};
pub use link::{Claimer, Link, StartError, start};
pub use reconcile::{REPUBLISH_ROUND, markers};

use crate::events::Event as _;
use crate::facility::Facility;
use crate::gate::Gate;
use crate::model::FacilityState;
use crate::model::{Decision, GateStats};
use crate::notify::Progress;
use crate::outbox::admitted::{Admitted, Cached};
use crate::store::handoff::Desk;
use crate::store::{Store, StoreError};
use lane::{Lane, Resume};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

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
struct LaneNotes {
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
    let gate = FacilityGate::new(gate, store)?;
    let (kick, kicked) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel();
    let stop = LaneStop {
        live: Some(kick.clone()),
        replay: Some(release.clone()),
    };
    let between = Arc::new(LaneNotes::default());
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
            Resume::End => return lane.stats(),
            Resume::Now => None,
            Resume::Wait(wait) => Some(wait),
        };
        for wake in peers.woken(wait) {
            lane.woken(&wake);
        }
    }
}
