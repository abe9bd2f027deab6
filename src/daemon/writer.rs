//! The outbox writer: one OS thread that owns the writing SQLite
//! connection (rusqlite blocks). It admits queued scans in group commits —
//! with the embedded store deciding them in the same transaction — and
//! ACKs each scan only after its commit. It ends when its queue is closed
//! and empty: every scanner has stopped and dropped its sender, so nothing
//! read is left behind (`crate::shutdown` says why that, not the stop
//! token, ends it).

use super::Wiring;
use super::embedded;
use super::supervisor::{Stage, StageResult};
use crate::backoff::Backoff;
use crate::capture::Scan;
use crate::claimer;
use crate::events::{self, Event as _};
use crate::gate::Gate;
use crate::model::{Decision, GateStats};
use crate::notify::Progress;
use crate::shutdown::Stop;
use crate::source::Inbound;
use crate::source::signal::Signals;
use crate::store::Store;
use crate::store::handoff::{Desk, Next};
use crate::store::space::Floor;
use crate::telemetry::Telemetry;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Scans per outbox transaction at most (group commit).
pub const ADMIT_BATCH: usize = 128;

/// Scans buffered between the sources and the outbox writer.
const QUEUE: usize = 1024;

/// How often scans left `pending` by a failed decision are retried while no
/// new scan arrives.
const RETRY_PENDING: Duration = Duration::from_secs(1);

/// Who decides the scans the outbox writer admits.
pub(super) enum Decider {
    /// Embedded store: decided in the admitting transaction.
    Here(Box<Gate>),
    /// Facility store: the claimer's threads decide; the writer admits,
    /// ACKs and kicks them.
    Claimer {
        /// Facility id (for content keys).
        facility_id: String,
        /// Wakes the claimer's live lane.
        kick: claimer::Kicker,
    },
}

/// Where the writer's decisions and audit records go besides its
/// database ([`start`]).
pub(super) struct Reports<'a> {
    /// Counts and latencies.
    pub(super) telemetry: &'a Telemetry,
    /// The scanners' feedback.
    pub(super) signals: &'a Signals,
    /// This gateway's id (its audit records').
    pub(super) gateway: &'a str,
}

/// What the outbox writer reports to and checks besides its database.
#[derive(Clone, Copy)]
pub(super) struct WriterHooks<'a> {
    /// Counts and latencies it publishes.
    telemetry: &'a Telemetry,
    /// Decisions back to the scanners (after the ACK).
    signals: &'a Signals,
    /// This gateway's id (its audit records').
    gateway: &'a str,
    /// Its turns, watched by the systemd watchdog.
    progress: &'a Progress,
    /// `[outbox] min_free_mb`: below it a write is refused like a full disk.
    floor: &'a crate::store::space::Floor,
}

/// The outbox writer thread: admit (+ decide, embedded) in one commit → ACK,
/// batch by batch. Returns the gate's counters (embedded) and how many scans
/// could not be made durable (only possible when shutdown meets a database
/// that refuses writes).
/// Each write attempt (and each decision of leftovers) is a turn of
/// `progress`; `recovered` is told once what a crash left is decided
/// (embedded) or handed to the claimer.
fn outbox_writer(
    mut store: Store,
    mut decider: Decider,
    mut rx: mpsc::Receiver<Inbound>,
    stopping: Stop,
    hooks: WriterHooks<'_>,
    recovered: oneshot::Sender<()>,
) -> (GateStats, usize) {
    let WriterHooks {
        telemetry,
        progress,
        floor,
        signals,
        ..
    } = hooks;
    let mut undurable = 0;
    // Control lapses not written yet (a failed write is retried with the
    // next batch).
    let mut lapsed: Vec<crate::source::operator::Lapse> = Vec::new();
    // Control reads a stopped daemon left waiting: none will get a read.
    lapse(&mut store, hooks, |tx, gw| {
        crate::gate::control::lapse_open(tx, gw)
    });
    // Crash recovery: scans made durable before a crash are decided first,
    // in capture order, before anything new.
    let mut undecided = {
        let _turn = progress.turn();
        match &mut decider {
            Decider::Here(gate) => decide_leftovers(&mut store, gate, hooks),
            Decider::Claimer { kick, .. } => {
                kick.kick();
                false
            }
        }
    };
    let _ = recovered.send(());
    // Waits for scans and handed verdicts at once (facility mode).
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime without I/O or timers builds");
    loop {
        let first = match wait_for_work(
            &mut store,
            &mut decider,
            &mut rx,
            &rt,
            &mut undecided,
            hooks,
        ) {
            Work::Inbound(first) => first,
            Work::Again => continue,
            Work::End => break,
        };
        let mut batch = Vec::with_capacity(ADMIT_BATCH);
        let mut next = Some(first);
        while let Some(inbound) = next.take() {
            match inbound {
                Inbound::Scan(c) => batch.push(c),
                Inbound::Lapsed(l) => lapsed.push(l),
            }
            if batch.len() < ADMIT_BATCH {
                next = rx.try_recv().ok();
            }
        }
        if batch.is_empty() {
            if lapse(&mut store, hooks, |tx, gw| {
                crate::gate::control::lapse(tx, gw, &lapsed)
            }) {
                lapsed.clear();
            }
            continue;
        }
        let (scans, acks): (Vec<Scan>, Vec<_>) = batch
            .into_iter()
            .map(|c| (c.scan, (c.durable, c.in_flight)))
            .unzip();
        match write_until_durable(&mut store, &mut decider, &scans, &stopping, progress, floor) {
            Ok(decisions) => {
                crate::events::Decided {
                    decisions: &decisions,
                    telemetry,
                }
                .emit();
                for durable in acks.iter().filter_map(|(d, _)| d.as_ref()) {
                    durable.confirm(); // the scanner may have gone; it will resend
                }
                signals.tell(&decisions);
            }
            Err(()) => {
                for s in &scans {
                    crate::events::ScanNotStored {
                        scanner: &s.profile.scanner,
                        scan_uuid: &s.uuid.to_string(),
                    }
                    .emit();
                }
                undurable += scans.len();
            }
        }
        // After the batch's reads: one that came just in time is admitted
        // first, and its control is then no longer open.
        if !lapsed.is_empty()
            && lapse(&mut store, hooks, |tx, gw| {
                crate::gate::control::lapse(tx, gw, &lapsed)
            })
        {
            lapsed.clear();
        }
        match &mut decider {
            Decider::Here(_) => undecided = store.has_pending().unwrap_or(true),
            Decider::Claimer { kick, .. } => {
                if !kick.kick() {
                    // Nobody would ever decide these scans: stop, so the
                    // service restarts (they stay durable in the outbox).
                    events::StageFailed::ClaimerGone.emit();
                    break;
                }
            }
        }
    }
    match &mut decider {
        Decider::Claimer { kick, .. } => {
            // From now on the lanes write their rounds themselves.
            kick.desk().close(&mut store);
        }
        Decider::Here(_) => {}
    }
    match &mut decider {
        Decider::Here(gate) => {
            if undecided {
                let _turn = progress.turn();
                decide_leftovers(&mut store, gate, hooks);
            }
            (gate.stats(), undurable)
        }
        Decider::Claimer { .. } => (GateStats::default(), undurable),
    }
}

/// What the writer does after a wait ([`wait_for_work`]). (A return value
/// moved once per batch: its size costs nothing worth a box.)
#[allow(clippy::large_enum_variant)]
enum Work {
    /// Write a batch, beginning with this.
    Inbound(Inbound),
    /// Wait again.
    Again,
    /// Every sender is gone and the queue is empty: end.
    End,
}

/// Wait for the next scan or control lapse. Meanwhile: what could not be
/// decided is retried now and then (embedded; `undecided` says whether
/// something still is), and the claimer's verdicts handed to this writer
/// are written as they come (facility).
fn wait_for_work(
    store: &mut Store,
    decider: &mut Decider,
    rx: &mut mpsc::Receiver<Inbound>,
    rt: &tokio::runtime::Runtime,
    undecided: &mut bool,
    hooks: WriterHooks<'_>,
) -> Work {
    if *undecided {
        // Something could not be decided: retry it now and then, without
        // waiting for the next scan to come along.
        return match rx.try_recv() {
            Ok(c) => Work::Inbound(c),
            Err(mpsc::error::TryRecvError::Disconnected) => Work::End,
            Err(mpsc::error::TryRecvError::Empty) => {
                std::thread::sleep(RETRY_PENDING);
                if let Decider::Here(gate) = decider {
                    let _turn = hooks.progress.turn();
                    *undecided = decide_leftovers(store, gate, hooks);
                }
                Work::Again
            }
        };
    }
    match decider {
        Decider::Claimer { kick, .. } => match kick.desk().next(rt, rx) {
            Next::Item(c) => Work::Inbound(c),
            Next::Closed => Work::End,
            Next::Handed => {
                let _turn = hooks.progress.turn();
                kick.desk().run_alone(store);
                Work::Again
            }
        },
        Decider::Here(_) => rx.blocking_recv().map_or(Work::End, Work::Inbound),
    }
}

/// Write control lapses (`write`: `gate::control`) in a transaction of
/// their own, emit their audit records and tell the scanners of those
/// to be told ([`crate::source::operator::Lapse::tell`]); a failure is
/// logged and `false` (the caller tries again with its next batch; what
/// is still open at a stop lapses at the next start, untold).
fn lapse(
    store: &mut Store,
    hooks: WriterHooks<'_>,
    write: impl FnOnce(&rusqlite::Connection, &str) -> rusqlite::Result<crate::gate::control::Lapses>,
) -> bool {
    let _turn = hooks.progress.turn();
    let done = store.write().and_then(|w| {
        let emitted = write(&w.tx, hooks.gateway).map_err(|e| w.err(e))?;
        w.commit()?;
        Ok(emitted)
    });
    match done {
        Ok(lapses) => {
            crate::audit::emit(&lapses.emitted);
            for scanner in &lapses.scanners {
                hooks.signals.tell_lapsed(scanner);
            }
            true
        }
        Err(e) => {
            crate::events::DecidingFailed {
                error: &e,
                then: crate::events::DecidingThen::RetriedEvery(RETRY_PENDING),
            }
            .emit();
            false
        }
    }
}

/// Decide whatever is pending; true if something is still left undecided.
fn decide_leftovers(store: &mut Store, gate: &mut Gate, hooks: WriterHooks<'_>) -> bool {
    match embedded::decide_pending(store, gate) {
        Ok(decided) => {
            crate::events::Decided {
                decisions: &decided,
                telemetry: hooks.telemetry,
            }
            .emit();
            hooks.signals.tell(&decided);
        }
        Err(e) => crate::events::DecidingFailed {
            error: &e,
            then: crate::events::DecidingThen::RetriedEvery(RETRY_PENDING),
        }
        .emit(),
    }
    store.has_pending().unwrap_or(true)
}

/// Retry the durable write until it succeeds: a scan that was read is never
/// dropped while the process runs, and no ACK goes out before it succeeds.
/// Retrying is safe: the outbox is idempotent by scan UUID. Only when
/// shutdown has been requested and the write keeps failing does it give up
/// (`Err`), so that a full disk cannot turn SIGTERM into a hang. Free space
/// below `floor` (`[outbox] min_free_mb`) is a refused write like a full
/// disk's: the space left is for deciding what was already stored.
fn write_until_durable(
    store: &mut Store,
    decider: &mut Decider,
    scans: &[Scan],
    stopping: &Stop,
    progress: &Progress,
    floor: &crate::store::space::Floor,
) -> Result<Vec<Decision>, ()> {
    let mut pause = Backoff::new(Duration::from_millis(50), Duration::from_secs(5));
    let mut failures_while_stopping = 0;
    let mut failed = false;
    loop {
        let turn = progress.turn();
        let written = match floor.check() {
            Err(low) => Err(low.to_string()),
            Ok(()) => match decider {
                Decider::Here(gate) => {
                    embedded::admit_and_decide(store, gate, scans).map(|(_, d)| d)
                }
                Decider::Claimer { facility_id, kick } => store
                    .admit_with(facility_id, scans, kick.desk(), kick.admitted())
                    .map(|_| Vec::new()),
            }
            .map_err(|e| e.to_string()),
        };
        // (A failed attempt that returned is a turn: the back-off is not.)
        drop(turn);
        match written {
            Ok(decisions) => {
                if failed {
                    events::OutboxWritesAgain {
                        db: store.path(),
                        scans: scans.len(),
                    }
                    .emit();
                }
                return Ok(decisions);
            }
            Err(e) => {
                failed = true;
                crate::events::OutboxWriteFailed {
                    db: store.path(),
                    scans: scans.len(),
                    error: &e,
                    retry_in: pause.peek(),
                }
                .emit();
                if stopping.is_set() {
                    failures_while_stopping += 1;
                    if failures_while_stopping >= 3 {
                        return Err(());
                    }
                }
                let pause = pause.failed();
                match decider {
                    // The claimer's verdicts are written meanwhile: below
                    // the disk floor they still may be, and a lane must
                    // not wait for the admits' back-off.
                    Decider::Claimer { kick, .. } => serve_for(kick.desk(), store, pause, progress),
                    Decider::Here(_) => std::thread::sleep(pause),
                }
            }
        }
    }
}

/// Run the writes handed to `desk` as they come, for `pause` (each run a
/// turn of `progress`).
fn serve_for(desk: &Desk, store: &mut Store, pause: Duration, progress: &Progress) {
    let until = std::time::Instant::now() + pause;
    loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() || !desk.wait(left) {
            return;
        }
        let _turn = progress.turn();
        desk.run_alone(store);
    }
}

/// Start the writer stage on `store`: scans are queued on the returned
/// sender; the receiver hears once what a crash left is decided (embedded)
/// or handed to the claimer. Its progress is watched while scans wait in
/// its queue.
pub(super) fn start(
    wiring: &mut Wiring,
    store: Store,
    decider: Decider,
    reports: Reports<'_>,
    floor: Floor,
    stop: Stop,
) -> (mpsc::Sender<Inbound>, oneshot::Receiver<()>) {
    let (tx, rx) = mpsc::channel::<Inbound>(QUEUE);
    let Reports {
        telemetry,
        signals,
        gateway,
    } = reports;
    let signals = signals.clone();
    let gateway = gateway.to_string();
    let (recovered, heard) = oneshot::channel();
    let telemetry = telemetry.clone();
    let progress = Progress::new("outbox writer");
    let queue = tx.downgrade();
    // Scans wait in its queue (a handle that does not keep it open).
    let waiting = move || {
        queue
            .upgrade()
            .is_some_and(|q| q.capacity() < q.max_capacity())
    };
    let stall = wiring.stall(Duration::ZERO);
    wiring
        .watch
        .add(progress.clone(), stall, Some(Box::new(waiting)));
    wiring
        .stages
        .thread(Stage::Writer, "outbox-writer", move || {
            let hooks = WriterHooks {
                telemetry: &telemetry,
                signals: &signals,
                gateway: &gateway,
                progress: &progress,
                floor: &floor,
            };
            let (stats, undurable) = outbox_writer(store, decider, rx, stop, hooks, recovered);
            StageResult::Writer { stats, undurable }
        });
    (tx, heard)
}
