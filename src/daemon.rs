//! The daemon: the one place that knows every stage and wires them.
//!
//! ```text
//!  source tasks (async) ──Captured──► outbox writer thread
//!  frame + capture           mpsc     one transaction: outbox rows, then (savepoint)
//!        ▲                            gate decisions in capture order + ledger + audit
//!        │                            COMMIT (one fsync)
//!        └──── ACK after the commit ◄─────┘
//! ```
//!
//! The outbox writer owns the SQLite connection on its own OS thread because
//! rusqlite blocks; the async runtime only runs the sources. Shutdown is one
//! `watch` flag: sources stop reading and drop their senders, the writer
//! drains what is in flight, decides it, and returns.
//!
//! With `[redis]` the writer only admits (commit, ACK) and kicks the
//! [`claimer`]: two threads (its live lane for new scans, its replay lane
//! for an outage's backlog), each with its own connection and blocking
//! redis client, deciding in pipelined claim rounds; the connections take
//! turns at writing (`Store::write`).
//!
//! The [`sweeper`] thread first reads every page of the database (damage
//! stops the daemon with exit 3), then overwrites decided scans' raw bytes
//! after `[outbox] keep_raw_hours`, one short write turn at a time.

pub mod claimer;
pub mod sweeper;

use crate::capture::Scan;
use crate::config::{ScannerKind, Settings};
use crate::facility::FacilityError;
use crate::gate::{Decision, Gate, GateConfig, GateStats};
use crate::source::{self, Captured};
use crate::store::{Store, StoreError};
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// Scans per outbox transaction at most (group commit).
pub(crate) const ADMIT_BATCH: usize = 128;
/// Scans buffered between the sources and the outbox writer.
const QUEUE: usize = 1024;

/// What a run did.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunReport {
    /// Gate counters.
    pub stats: GateStats,
}

/// Why the daemon could not run.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The database or state directory is unusable.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The facility Redis is reachable but set up so that claims could be
    /// lost (e.g. it may evict keys).
    #[error("{0}")]
    Facility(crate::facility::FacilityError),
    /// The outbox writer thread died.
    #[error("the outbox writer thread panicked; state is safe in {0}, restart the service")]
    WriterPanicked(PathBuf),
    /// A thread of the facility claimer died.
    #[error(
        "a thread of the facility claimer panicked; scans are safe in {0} and are claimed after a restart of the service"
    )]
    ClaimerPanicked(PathBuf),
    /// A scanner's task ended while the daemon ran (a bug: it should
    /// reconnect by itself until shutdown).
    #[error(
        "a scanner task ended unexpectedly ({0}); scangate stopped so that it is restarted with every scanner. Scans already read are safe in the outbox"
    )]
    SourceEnded(String),
    /// The integrity check that runs after start found the database
    /// corrupt; the daemon stopped.
    #[error(
        "database {path} failed its integrity check after start ({detail}); scangate stopped. Scans read since start were written to it. Fix: move the file aside for investigation (sqlite3's `.recover` can salvage rows), restore a backup, then start scangate again"
    )]
    CorruptWhileRunning {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        detail: String,
    },
    /// Shutdown came while the database refused writes: these scans were
    /// read, never acknowledged, and could not be stored.
    #[error(
        "{count} scan(s) read during shutdown could not be written to {path} (see the errors above) and were not acknowledged; check the disk, then restart"
    )]
    Undurable {
        /// How many.
        count: usize,
        /// The database.
        path: PathBuf,
    },
}

/// Run the pipeline until `shutdown` completes, then drain and return.
/// `settings` were resolved ([`Settings::resolve`]): the secrets are read.
pub async fn run(
    settings: Settings,
    shutdown: impl Future<Output = ()>,
) -> Result<RunReport, DaemonError> {
    let cfg = &settings.config;
    let state_dir = cfg.state_dir();
    let store = Store::open(&state_dir)?;
    if cfg.redis.is_none() {
        let waiting = store.unresolved()?;
        if waiting > 0 {
            tracing::warn!(
                scans = waiting,
                "{waiting} scans wait for a facility store that is not configured ([redis]): they stay undecided. Fix: restore the [redis] section, or, if the facility store is gone for good, stop scangate and run `scangate outbox decide-locally`"
            );
        }
    }
    let gate = Gate::new(GateConfig::from_config(cfg), &store)?;
    tracing::info!(
        db = %store.path().display(), facility = %cfg.gateway.facility, gateway = %cfg.gateway.id,
        scanners = cfg.scanners.len(), window_ms = cfg.dedup.window_ms,
        store = if cfg.redis.is_some() { "facility redis" } else { "embedded" },
        "scangate starting"
    );
    // With [redis], the claimer's threads decide; the writer only admits.
    // Fires when the claimer's live lane ends (at shutdown, after the
    // writer; before it, only if it failed).
    let (claimer_gone_tx, mut claimer_gone) = tokio::sync::oneshot::channel::<()>();
    let (decider, claimers) = match &settings.redis {
        None => (Decider::Here(Box::new(gate)), None),
        Some(redis) => {
            let link = claimer::Link::new(cfg, redis);
            // The redis client blocks: connect off the async runtime.
            let (link, first) = tokio::task::spawn_blocking(move || {
                let first = link.connect_checked();
                (link, first)
            })
            .await
            .expect("the connect task does not panic");
            if let Err(
                e @ (FacilityError::Misconfigured { .. }
                | FacilityError::SettingsDiffer { .. }
                | FacilityError::NoPermission { .. }),
            ) = first
            {
                return Err(DaemonError::Facility(e));
            }
            let (kick, claimers) = claimer::spawn(
                &store,
                gate,
                link,
                first.ok(),
                |decisions| {
                    for d in decisions {
                        tracing::debug!(scan = %d.scan_uuid, decision = d.verdict.state(), "decided");
                    }
                },
                claimer_gone_tx,
            )?;
            let decider = Decider::Claimer {
                facility: cfg.gateway.facility.clone(),
                kick,
            };
            (decider, Some(claimers))
        }
    };
    if cfg.scanners.is_empty() {
        tracing::warn!(
            "no [[scanner]] is configured: nothing will be read. Fix: add a [[scanner]] section for each scanner (`scangate devices` lists what is attached) and restart"
        );
    }
    // Every page is read after start, on the sweeper's thread, before its
    // first sweep: on a gateway's SD card a year of scans takes minutes, and
    // the counter must not wait for it.
    let (stop_sweeping, sweep_stop) = std::sync::mpsc::channel::<()>();
    let (corrupt_tx, mut corrupt) = tokio::sync::oneshot::channel::<(PathBuf, String)>();
    let sweeper = {
        let companion = store.companion()?.yielding();
        let keep = Duration::from_secs(cfg.outbox.keep_raw_hours * 3600);
        std::thread::Builder::new()
            .name("raw-sweeper".into())
            .spawn(move || sweeper::run(companion, keep, sweep_stop, corrupt_tx))
            .expect("spawning a thread")
    };

    let db_path = store.path().to_owned();
    let (tx, rx) = mpsc::channel::<Captured>(QUEUE);
    let (stop_tx, stop_rx) = watch::channel(false);
    let writer_stop = stop_rx.clone();
    // Fires when the writer thread ends for any reason, panics included.
    let (writer_gone_tx, writer_gone) = tokio::sync::oneshot::channel::<()>();
    let writer = std::thread::Builder::new()
        .name("outbox-writer".into())
        .spawn(move || {
            let _gone = writer_gone_tx; // dropped on return or unwind
            outbox_writer(store, decider, rx, writer_stop)
        })
        .expect("spawning a thread");

    let mut sources = tokio::task::JoinSet::new();
    for sc in &cfg.scanners {
        let out = source::ToOutbox::new(tx.clone());
        match &sc.kind {
            ScannerKind::Serial(serial) => {
                sources.spawn(source::serial::run(
                    sc.with_kind(serial.clone()),
                    out,
                    stop_rx.clone(),
                ));
            }
            ScannerKind::Hid(hid) => {
                sources.spawn(source::hid::run(
                    sc.with_kind(hid.clone()),
                    out,
                    stop_rx.clone(),
                ));
            }
        }
    }
    // Held until shutdown: with no scanner configured the writer still
    // waits, the claimer still replays a backlog, and the daemon stops only
    // when asked.
    let idle_sender = tx;

    let mut failed = None;
    tokio::select! {
        _ = shutdown => tracing::info!("stopping: closing scanners, draining the outbox"),
        _ = writer_gone => tracing::error!("the outbox writer stopped unexpectedly; closing scanners"),
        // A passed check drops the sender: that branch is then disabled.
        Ok((path, detail)) = &mut corrupt => {
            tracing::error!(db = %path.display(), "the database failed its integrity check: {detail}; stopping");
            failed = Some(DaemonError::CorruptWhileRunning { path, detail });
        }
        // A scanner's task runs until shutdown (it reconnects by itself);
        // one that ends is a bug: stop, so the service manager restarts
        // the gateway with every scanner, rather than run without it.
        // The claimer's live lane ends after the writer, at shutdown;
        // before that only if a thread of the claimer panicked.
        _ = &mut claimer_gone => {
            tracing::error!("the facility claimer stopped unexpectedly; stopping");
            failed = Some(DaemonError::ClaimerPanicked(state_dir.clone()));
        }
        Some(ended) = sources.join_next(), if !sources.is_empty() => {
            let detail = match ended {
                Ok(()) => "it returned".to_string(),
                Err(e) => e.to_string(),
            };
            tracing::error!("a scanner task ended unexpectedly ({detail}); stopping");
            failed = Some(DaemonError::SourceEnded(detail));
        }
    }
    let _ = stop_tx.send(true);
    drop(idle_sender);
    // The sweeper stops between two chunks, before the writer's store (and
    // with it the state directory's lock) goes away.
    drop(stop_sweeping);
    let _ = tokio::task::spawn_blocking(move || sweeper.join()).await;
    while sources.join_next().await.is_some() {}
    let (mut stats, undurable) = tokio::task::spawn_blocking(move || writer.join())
        .await
        .ok()
        .and_then(Result::ok)
        .ok_or_else(|| DaemonError::WriterPanicked(state_dir.clone()))?;
    // The writer dropped its kicker: each claimer lane makes a last round.
    if let Some(claimers) = claimers {
        stats = tokio::task::spawn_blocking(move || claimers.join())
            .await
            .ok()
            .flatten()
            .ok_or_else(|| DaemonError::ClaimerPanicked(state_dir.clone()))?;
    }
    if let Some(e) = failed {
        return Err(e);
    }
    if undurable > 0 {
        return Err(DaemonError::Undurable {
            count: undurable,
            path: db_path,
        });
    }
    tracing::info!(
        committed = stats.committed,
        suppressed = stats.suppressed,
        rejected = stats.rejected,
        exact_lookups = stats.exact_lookups,
        lookups_saved_by_bloom = stats.lookups_saved,
        "scangate stopped"
    );
    Ok(RunReport { stats })
}

/// How often scans left `pending` by a failed decision are retried while no
/// new scan arrives.
const RETRY_PENDING: Duration = Duration::from_secs(1);

/// Who decides the scans the outbox writer admits.
enum Decider {
    /// Embedded store: decided in the admitting transaction.
    Here(Box<Gate>),
    /// Facility store: the claimer's threads decide; the writer admits,
    /// ACKs and kicks them.
    Claimer {
        /// Facility id (for content keys).
        facility: String,
        /// Wakes the claimer's live lane; dropped, stops both lanes.
        kick: claimer::Kicker,
    },
}

/// The outbox writer thread: admit (+ decide, embedded) in one commit → ACK,
/// batch by batch. Returns the gate's counters (embedded) and how many scans
/// could not be made durable (only possible when shutdown meets a database
/// that refuses writes).
fn outbox_writer(
    mut store: Store,
    mut decider: Decider,
    mut rx: mpsc::Receiver<Captured>,
    stopping: watch::Receiver<bool>,
) -> (GateStats, usize) {
    let mut undurable = 0;
    // Crash recovery: scans made durable before a crash are decided first,
    // in capture order, before anything new.
    let mut undecided = match &mut decider {
        Decider::Here(gate) => decide_leftovers(&mut store, gate),
        Decider::Claimer { kick, .. } => {
            kick.kick();
            false
        }
    };
    loop {
        let first = if undecided {
            // Something could not be decided: retry it now and then, without
            // waiting for the next scan to come along.
            match rx.try_recv() {
                Ok(c) => c,
                Err(mpsc::error::TryRecvError::Disconnected) => break,
                Err(mpsc::error::TryRecvError::Empty) => {
                    std::thread::sleep(RETRY_PENDING);
                    if let Decider::Here(gate) = &mut decider {
                        undecided = decide_leftovers(&mut store, gate);
                    }
                    continue;
                }
            }
        } else {
            match rx.blocking_recv() {
                Some(c) => c,
                None => break,
            }
        };
        let mut batch = vec![first];
        while batch.len() < ADMIT_BATCH {
            match rx.try_recv() {
                Ok(c) => batch.push(c),
                Err(_) => break,
            }
        }
        let (scans, acks): (Vec<Scan>, Vec<_>) = batch
            .into_iter()
            .map(|c| (c.scan, (c.durable, c.in_flight)))
            .unzip();
        match write_until_durable(&mut store, &mut decider, &scans, &stopping) {
            Ok(decisions) => {
                for d in decisions {
                    tracing::debug!(scan = %d.scan_uuid, decision = d.verdict.state(), "decided");
                }
                for durable in acks.iter().filter_map(|(d, _)| d.as_ref()) {
                    durable.confirm(); // the scanner may have gone; it will resend
                }
            }
            Err(()) => {
                for s in &scans {
                    tracing::error!(scan = %s.uuid, scanner = %s.profile.scanner, "scan NOT stored (database refuses writes during shutdown); it was not acknowledged");
                }
                undurable += scans.len();
            }
        }
        match &mut decider {
            Decider::Here(_) => undecided = store.has_pending().unwrap_or(true),
            Decider::Claimer { kick, .. } => {
                if !kick.kick() {
                    // Nobody would ever decide these scans: stop, so the
                    // service restarts (they stay durable in the outbox).
                    tracing::error!("the facility claimer is gone; stopping");
                    break;
                }
            }
        }
    }
    match &mut decider {
        Decider::Here(gate) => {
            if undecided {
                decide_leftovers(&mut store, gate);
            }
            (gate.stats(), undurable)
        }
        Decider::Claimer { .. } => (GateStats::default(), undurable),
    }
}

/// Decide whatever is pending; true if something is still left undecided.
fn decide_leftovers(store: &mut Store, gate: &mut Gate) -> bool {
    if let Err(e) = gate.decide_pending(store) {
        tracing::error!(
            "deciding pending scans failed: {e}; they stay durable in the outbox and are retried every {RETRY_PENDING:?}"
        );
    }
    store.has_pending().unwrap_or(true)
}

/// Retry the durable write until it succeeds: a scan that was read is never
/// dropped while the process runs, and no ACK goes out before it succeeds.
/// Retrying is safe: the outbox is idempotent by scan UUID. Only when
/// shutdown has been requested and the write keeps failing does it give up
/// (`Err`), so that a full disk cannot turn SIGTERM into a hang.
fn write_until_durable(
    store: &mut Store,
    decider: &mut Decider,
    scans: &[Scan],
    stopping: &watch::Receiver<bool>,
) -> Result<Vec<Decision>, ()> {
    let mut pause = Duration::from_millis(50);
    let mut failures_while_stopping = 0;
    loop {
        let written = match decider {
            Decider::Here(gate) => gate.admit_and_decide(store, scans).map(|(_, d)| d),
            Decider::Claimer { facility, .. } => store.admit(facility, scans).map(|_| Vec::new()),
        };
        match written {
            Ok(decisions) => return Ok(decisions),
            Err(e) => {
                tracing::error!(
                    scans = scans.len(),
                    "cannot write scans to the outbox: {e}; retrying in {pause:?} (no ACK is sent until this succeeds)"
                );
                if *stopping.borrow() {
                    failures_while_stopping += 1;
                    if failures_while_stopping >= 3 {
                        return Err(());
                    }
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_secs(5));
            }
        }
    }
}
