//! The daemon: the one place that knows every stage and wires them.
//!
//! ```text
//!  source tasks (async) ──Captured──► outbox writer thread
//!  frame + capture           mpsc     one transaction: outbox rows, then
//!        ▲                            gate decisions in capture order + ledger + audit
//!        │                            COMMIT (one fsync)
//!        └──── ACK after the commit ◄─────┘
//! ```
//!
//! The outbox writer owns the SQLite connection on its own OS thread because
//! rusqlite blocks; the async runtime only runs the sources. With the
//! embedded store it admits and decides in one transaction
//! ([`embedded`]). With `[redis]` it only admits (commit, ACK) and kicks
//! the [`claimer`]: two threads (its live lane for new scans, its replay
//! lane for an outage's backlog), each with its own connection and blocking
//! redis client, deciding in pipelined claim rounds; the connections take
//! turns at writing (`Store::write`). The [`sweeper`] thread first reads
//! every page of the database (damage stops the daemon with exit 3), then
//! overwrites decided scans' raw bytes after `[outbox] keep_raw_hours`, one
//! short write turn at a time.
//!
//! **Publishing.** Sources, writer and claimer report to one
//! [`crate::telemetry::Telemetry`]; `metrics::run` (status file, database
//! samples, `[metrics] textfile`) and the `[metrics] listen` server run as
//! tasks beside the stages, not as stages: their failures are logged and
//! retried, never a reason to stop reading scans. They end on the stop token.
//!
//! **systemd** ([`crate::notify`]): `READY=1` once the outbox is open,
//! recovery is done (the writer decided or handed on what a crash left)
//! and the scanners are set up (each connected, or given
//! [`SCANNERS_SETUP`] to); then `STATUS=` one line kept current, and, with
//! `WATCHDOG_USEC`, `WATCHDOG=1` every half interval while the writer and
//! the claimer's lanes make progress ([`crate::notify::Watch`]); at the
//! stop `STOPPING=1`, and `EXTEND_TIMEOUT_USEC` while a long drain runs.
//!
//! **Reload** (SIGHUP, [`Reloads`]): the configuration is read again;
//! scanners added, removed or changed start and stop alone, anything else
//! changed is refused ([`reload`]).
//!
//! **Stopping.** Every stage is started through the [`supervisor`], which
//! hears how each ends, and holds a copy of one stop token
//! ([`crate::shutdown::Stop`]; each scanner a child of it, so a reload can
//! stop one). The daemon runs until the shutdown signal or until a stage
//! ends early (a failure), then stops the stages in the order
//! `stop_in_order` writes down.

pub mod claimer;
pub mod embedded;
pub mod metrics_http;
pub mod publish;
pub mod reload;
pub mod supervisor;
pub mod sweeper;

use crate::backoff::Backoff;
use crate::capture::Scan;
use crate::config::Settings;
use crate::events;
use crate::gate::facility::LaneKind;
use crate::gate::{Gate, GateConfig};
use crate::model::{Decision, GateStats};
use crate::notify::{Notifier, Progress, Watch};
use crate::shutdown::{Stop, Stopper};
use crate::source::Captured;
use crate::store::{Store, StoreError};
use crate::telemetry::{Summary, Telemetry};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use supervisor::{Stage, StageEnded, StageResult, Supervisor};
use tokio::sync::{mpsc, oneshot};

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
    /// `[metrics] listen` cannot be bound.
    #[error(transparent)]
    MetricsListen(#[from] crate::daemon::metrics_http::BindError),
    /// The facility Redis is reachable but set up so that claims could be
    /// lost (e.g. it may evict keys), or refuses this gateway (credentials,
    /// a grant, its settings): [`crate::facility::FacilityError::needs_technician`].
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
    /// The raw-bytes sweeper's thread died (a bug): raw bytes would stay,
    /// and the page check might not have run.
    #[error(
        "the raw-bytes sweeper stopped unexpectedly ({0}); scangate stopped so that it is restarted. Scans are safe in the outbox"
    )]
    SweeperPanicked(String),
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

/// How long `READY=1` waits for every scanner to connect after recovery
/// (a scanner that is not plugged in is retried by its task meanwhile).
pub const SCANNERS_SETUP: Duration = Duration::from_secs(3);
/// How often the status line is looked at (sent when it changed).
const STATUS_EVERY: Duration = Duration::from_millis(250);
/// A loop is wedged only after this long at least without progress while
/// it has work: longer than any back-off between two of its turns (the
/// writer's 5 s after a failed write).
const MIN_STALL: Duration = Duration::from_secs(10);
/// At the stop: after this long, and then every this long, the stop
/// timeout is extended by [`EXTEND_BY`] while the stages still make
/// progress, up to [`EXTEND_AT_MOST`] in all.
const EXTEND_EVERY: Duration = Duration::from_secs(2);
const EXTEND_BY: Duration = Duration::from_secs(20);
const EXTEND_AT_MOST: Duration = Duration::from_secs(600);

/// Reload requests (`systemctl reload`: SIGHUP) and the file the
/// configuration is read again from.
pub struct Reloads {
    /// The config file the daemon was started with (`None`: the built-in
    /// defaults, which a reload reads again as they are).
    pub config: Option<PathBuf>,
    /// One message per request.
    pub requests: mpsc::UnboundedReceiver<()>,
}

/// Run the pipeline until `shutdown` completes, then drain and return.
/// `settings` were resolved ([`Settings::resolve`]): the secrets are read.
pub async fn run(
    settings: Settings,
    shutdown: impl Future<Output = ()>,
) -> Result<RunReport, DaemonError> {
    run_with(settings, shutdown, None).await
}

/// [`run`], re-reading the configuration at each of `reloads`' requests.
pub async fn run_with(
    settings: Settings,
    shutdown: impl Future<Output = ()>,
    mut reloads: Option<Reloads>,
) -> Result<RunReport, DaemonError> {
    let notifier = Notifier::from_env();
    let watchdog = crate::notify::watchdog_interval();
    let mut watch = Watch::default();
    let stall = |at_least: Duration| watchdog.unwrap_or(Duration::ZERO).max(at_least);
    let mut running = settings.clone();
    let cfg = &settings.config;
    let state_dir = cfg.state_dir();
    let mut store = Store::open(&state_dir)?;
    if cfg.redis.is_none() {
        let waiting = store.unresolved()?;
        if waiting > 0 {
            events::StartWarning::NoFacilityStore { waiting }.emit();
        }
    }
    let gate = Gate::new(GateConfig::from_config(cfg), &store)?;
    events::Starting {
        db: store.path(),
        facility: &cfg.gateway.facility,
        gateway: &cfg.gateway.id,
        scanners: cfg.scanners.len(),
        window_ms: cfg.dedup.window_ms,
        facility_redis: cfg.redis.is_some(),
    }
    .emit();
    let scanner_names: Vec<String> = cfg.scanners.iter().map(|s| s.name.clone()).collect();
    let telemetry = crate::telemetry::Telemetry::new(
        &scanner_names,
        cfg.redis.as_ref().map(|r| r.max_clock_error_ms),
    );
    let listener = match cfg.metrics.listen {
        Some(addr) => Some(crate::daemon::metrics_http::bind(addr).await?),
        None => None,
    };
    let mut stages = Supervisor::default();
    let (stopper, stop) = crate::shutdown::channel();
    // With [redis], the claimer's lanes decide; the writer only admits.
    let mut facility_link = None;
    let (decider, lane_stop) = match &settings.redis {
        None => (Decider::Here(Box::new(gate)), None),
        Some(redis) => {
            let link = claimer::Link::new(cfg, redis);
            facility_link = Some(link.clone());
            // The redis client blocks: connect off the async runtime.
            let (link, first) = tokio::task::spawn_blocking(move || {
                let first = link.connect_checked();
                (link, first)
            })
            .await
            .expect("the connect task does not panic");
            let first = match first {
                Err(e) if e.needs_technician() => return Err(DaemonError::Facility(e)),
                first => first,
            };
            if let Ok(f) = &first {
                crate::daemon::claimer::records::set_scanner_clones(&mut store, f.clones())?;
                if let Some(clock) = f.clock() {
                    crate::daemon::claimer::records::set_clock(&mut store, clock)?;
                }
            }
            let (kick, lane_stop, lanes) = claimer::lanes(&store, gate, link, first.ok(), {
                let telemetry = telemetry.clone();
                move |decisions: &[Decision]| crate::events::Decided { decisions }.emit(&telemetry)
            })?;
            for lane in lanes {
                watch.add(
                    lane.progress(),
                    stall(MIN_STALL.max(lane.stall_bound())),
                    None,
                );
                let stage = match lane.kind() {
                    LaneKind::Live => Stage::LiveLane,
                    LaneKind::Replay => Stage::ReplayLane,
                };
                stages.thread(stage, &lane.thread_name(), move || {
                    StageResult::Lane(lane.run())
                });
            }
            let decider = Decider::Claimer {
                facility_id: cfg.gateway.facility.clone(),
                kick,
            };
            (decider, Some(lane_stop))
        }
    };
    if cfg.scanners.is_empty() {
        events::StartWarning::NoScanners.emit();
    }
    // Every page is read after start, on the sweeper's thread, before its
    // first sweep: on a gateway's SD card a year of scans takes minutes, and
    // the counter must not wait for it.
    {
        let companion = store.companion()?.yielding();
        let keep = sweeper::Keep {
            raw: Duration::from_secs(cfg.outbox.keep_raw_hours * 3600),
            decided: Duration::from_secs(cfg.dedup.retention_hours * 3600),
        };
        let stop = stop.clone();
        stages.thread(Stage::Sweeper, "raw-sweeper", move || {
            sweeper::run(companion, keep, stop)
        });
    }

    let anchor = {
        let mut anchor = crate::store::identity::Anchor::new(&state_dir)?;
        let mut facility = settings.redis.as_ref().map(|r| FacilityAnchor::new(cfg, r));
        let stop = stop.clone();
        let telemetry = telemetry.clone();
        std::thread::Builder::new()
            .name("anchor".into())
            .spawn(move || {
                while !stop.sleep(crate::store::identity::ANCHOR_EVERY) {
                    match anchor.tick() {
                        // (Written, or found current: the head is anchored.)
                        Ok(_) => telemetry.anchored(),
                        Err(e) => crate::events::AnchorFailed {
                            place: crate::events::AnchorPlace::StateFile,
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
            .map_err(|e| StoreError::StateDir {
                dir: state_dir.clone(),
                source: e,
            })?
    };

    // Metrics and the status file: outside the supervisor, they never stop
    // the gateway (failures are logged and retried).
    let publishing = {
        let publish = crate::daemon::publish::Publish {
            state_dir: state_dir.clone(),
            textfile: cfg.metrics.textfile.clone(),
            interval: Duration::from_secs(cfg.metrics.interval_s),
            warn_days_left: cfg.outbox.warn_days_left,
        };
        let mut tasks = vec![tokio::spawn(crate::daemon::publish::run(
            telemetry.clone(),
            publish,
            stop.clone(),
        ))];
        if let Some(listener) = listener {
            tasks.push(tokio::spawn(crate::daemon::metrics_http::serve(
                listener,
                telemetry.clone(),
                stop.clone(),
            )));
        }
        tasks
    };

    let db_path = store.path().to_owned();
    let (tx, rx) = mpsc::channel::<Captured>(QUEUE);
    let (recovered, mut writer_recovered) = oneshot::channel();
    {
        let stop = stop.clone();
        let telemetry = telemetry.clone();
        let progress = Progress::new("outbox writer");
        let queue = tx.downgrade();
        // Scans wait in its queue (a handle that does not keep it open).
        let waiting = move || {
            queue
                .upgrade()
                .is_some_and(|q| q.capacity() < q.max_capacity())
        };
        watch.add(progress.clone(), stall(MIN_STALL), Some(Box::new(waiting)));
        let floor = crate::store::space::Floor::new(&state_dir, cfg.outbox.min_free_mb);
        stages.thread(Stage::Writer, "outbox-writer", move || {
            let hooks = WriterHooks {
                telemetry: &telemetry,
                progress: &progress,
                floor: &floor,
            };
            let (stats, undurable) = outbox_writer(store, decider, rx, stop, hooks, recovered);
            StageResult::Writer { stats, undurable }
        });
    }
    let mut scanners = reload::Scanners::new(tx, telemetry.clone(), &cfg.gateway.id);
    for sc in &cfg.scanners {
        scanners.start(&mut stages, &stopper, sc.clone());
    }

    // Every stage runs until the stop: one that ends before it is a
    // failure (a scanner's task reconnects by itself, unless a reload
    // stopped it; the writer and the claimer's lanes run until stopped;
    // the sweeper ends early only when the page check found damage).
    let mut shutdown = std::pin::pin!(shutdown);
    let mut status_tick = tokio::time::interval(STATUS_EVERY);
    let mut ping = watchdog.map(|w| tokio::time::interval(w / 2));
    let (mut recovered_at, mut recovery_heard) = (None::<Instant>, false);
    let (mut ready, mut shown) = (false, String::new());
    let early = loop {
        tokio::select! {
            _ = &mut shutdown => {
                events::Lifecycle::Stopping.emit();
                break None;
            }
            Some(ended) = stages.next() => {
                if let Stage::Scanner(name) = &ended.stage
                    && scanners.ended(&mut stages, &stopper, name)
                {
                    if let StageResult::Panicked(why) = &ended.result {
                        events::StageFailed::ScannerPanickedOnReload { scanner: name, why }.emit();
                    }
                    continue;
                }
                break Some(ended);
            }
            heard = &mut writer_recovered, if !recovery_heard => {
                // (Err: the writer ended first; its end is heard above.)
                recovery_heard = true;
                recovered_at = heard.is_ok().then(Instant::now);
            }
            Some(()) = next_reload(&mut reloads) => {
                if ready {
                    notifier.reloading();
                }
                let path = reloads.as_ref().and_then(|r| r.config.clone());
                if let Some(new) = reloaded(&running, path).await {
                    let plan = reload::plan(&running, &new);
                    match plan {
                        Ok(plan) => {
                            events::Reloaded {
                                added: plan.added.len(),
                                removed: plan.removed.len(),
                                changed: plan.changed.len(),
                                described: &plan.describe(),
                                scanners: &new.config.scanners.iter().map(|s| s.name.clone()).collect::<Vec<_>>(),
                            }
                            .emit(&telemetry);
                            if let Some(link) = &facility_link {
                                link.set_scanners(&new.config);
                            }
                            scanners.apply(&mut stages, &stopper, plan);
                            running = new;
                        }
                        Err(keys) => events::ReloadRefused::NeedsRestart { keys: &keys }.emit(),
                    }
                }
                if ready {
                    shown = status_line(&telemetry.summary(), watch.wedged());
                    notifier.ready(&shown);
                }
            }
            _ = status_tick.tick() => {
                let line = status_line(&telemetry.summary(), watch.wedged());
                if !ready && let Some(at) = recovered_at {
                    let summary = telemetry.summary();
                    if summary.scanners_up == summary.scanners || at.elapsed() >= SCANNERS_SETUP {
                        ready = true;
                        events::Lifecycle::Ready { status: &line }.emit();
                        notifier.ready(&line);
                        shown = line;
                    }
                } else if ready && line != shown {
                    notifier.status(&line);
                    shown = line;
                }
            }
            _ = tick(&mut ping), if ready => {
                if watch.check(Instant::now()).is_empty() {
                    notifier.watchdog();
                }
            }
        }
    };
    let early = early.map(|ended| ended_early(ended, &state_dir));
    notifier.stopping("stopping: closing scanners, draining the outbox");
    // The daemon's sender is held until the stop: with no scanner
    // configured the writer still waits, the claimer still replays a
    // backlog.
    let ended = {
        let stopping = stop_in_order(&mut stages, &stopper, scanners.into_sender(), lane_stop);
        let mut stopping = std::pin::pin!(stopping);
        let began = Instant::now();
        let mut extend =
            tokio::time::interval_at(tokio::time::Instant::now() + EXTEND_EVERY, EXTEND_EVERY);
        loop {
            tokio::select! {
                ended = &mut stopping => break ended,
                _ = extend.tick(), if notifier.enabled() => {
                    let took = began.elapsed();
                    let wedged = watch.check(Instant::now());
                    if wedged.is_empty() && took < EXTEND_AT_MOST {
                        let line = format!("stopping: draining for {} s", took.as_secs());
                        events::Lifecycle::StopExtended { line: &line, by: EXTEND_BY }.emit();
                        notifier.extend_timeout(EXTEND_BY, &line);
                    }
                }
            }
        }
    };
    // The head as the stages left it, anchored once more.
    match anchor.join() {
        Ok((mut anchor, mut facility)) => {
            if let Err(e) = anchor.tick() {
                crate::events::AnchorFailed {
                    place: crate::events::AnchorPlace::StateFileAtStop,
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
    for task in publishing {
        if let Err(e) = task.await {
            events::StageFailed::PublisherFailed { error: &e }.emit();
        }
    }

    let (mut stats, mut lanes, mut undurable) = (GateStats::default(), None::<GateStats>, 0);
    let (mut writer_panicked, mut claimer_panicked, mut failed) = (false, false, early);
    for StageEnded { stage, result } in ended {
        match result {
            StageResult::Writer {
                stats: s,
                undurable: u,
            } => (stats, undurable) = (s, u),
            StageResult::Lane(s) => lanes = Some(lanes.unwrap_or_default().plus(&s)),
            StageResult::Panicked(why) => {
                events::StageFailed::Panicked {
                    stage: &stage,
                    why: &why,
                }
                .emit();
                match stage {
                    Stage::Writer => writer_panicked = true,
                    Stage::LiveLane | Stage::ReplayLane => claimer_panicked = true,
                    Stage::Scanner(_) => {
                        failed = failed.or(Some(DaemonError::SourceEnded(why)));
                    }
                    Stage::Sweeper => {
                        failed = failed.or(Some(DaemonError::SweeperPanicked(why)));
                    }
                }
            }
            StageResult::Corrupt { path, detail } => {
                // (Found while stopping: reported all the same.)
                events::StageFailed::Corrupt {
                    db: &path,
                    detail: &detail,
                    stopping: false,
                }
                .emit();
                failed = failed.or(Some(DaemonError::CorruptWhileRunning { path, detail }));
            }
            StageResult::Done => {}
        }
    }
    if writer_panicked || matches!(failed, Some(DaemonError::WriterPanicked(_))) {
        return Err(DaemonError::WriterPanicked(state_dir));
    }
    if claimer_panicked || matches!(failed, Some(DaemonError::ClaimerPanicked(_))) {
        return Err(DaemonError::ClaimerPanicked(state_dir));
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
    // With [redis], the lanes decided.
    let stats = lanes.unwrap_or(stats);
    events::Lifecycle::Stopped { stats: &stats }.emit();
    Ok(RunReport { stats })
}

/// The next reload request (never, without [`Reloads`]).
async fn next_reload(reloads: &mut Option<Reloads>) -> Option<()> {
    match reloads {
        Some(r) => r.requests.recv().await,
        None => std::future::pending().await,
    }
}

/// The next tick of the watchdog's timer (never, without a watchdog).
async fn tick(ping: &mut Option<tokio::time::Interval>) {
    match ping {
        Some(p) => {
            p.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// The configuration read again from `path` and resolved, as at start;
/// `None` (logged as an ERROR naming the file and key) if it is broken:
/// the daemon keeps running on `running`.
async fn reloaded(running: &Settings, path: Option<PathBuf>) -> Option<Settings> {
    let shown = path
        .as_ref()
        .map_or("the built-in defaults".to_string(), |p| {
            p.display().to_string()
        });
    let read = tokio::task::spawn_blocking(move || {
        let read = Settings::load(path.as_deref());
        let line = match (&read, &path) {
            (Err(_), Some(p)) => reload::syntax_error_line(p),
            _ => None,
        };
        (read, line)
    })
    .await;
    match read {
        Ok((Ok(new), _)) => Some(new),
        Ok((Err(e), line)) => {
            let at = line.map(|l| format!(" (line {l})")).unwrap_or_default();
            events::ReloadRefused::ConfigError {
                at: &at,
                error: &e,
                scanners: running.config.scanners.len(),
            }
            .emit();
            None
        }
        Err(e) => {
            events::ReloadRefused::ReadFailed {
                shown: &shown,
                error: &e,
            }
            .emit();
            None
        }
    }
}

/// systemd's one-line status: "2/2 scanners up, 0 undecided, facility ok
/// (clock +1 ms ±3 ms)"; a wedged loop first.
fn status_line(s: &Summary, wedged: &[&str]) -> String {
    let mut line = String::new();
    if !wedged.is_empty() {
        line += &format!("WEDGED: {}; ", wedged.join(", "));
    }
    line += &format!(
        "{}/{} scanners up, {} undecided",
        s.scanners_up, s.scanners, s.undecided
    );
    line += &match &s.facility {
        None => ", embedded store".to_string(),
        Some(f) if f.up => format!(
            ", facility ok (clock {:+.0} ms ±{:.0} ms)",
            f.offset_ms, f.bound_ms
        ),
        Some(_) => ", facility unreachable".to_string(),
    };
    line
}

/// The chain head anchored in the facility Redis too
/// (`scangate:{f}:anchor:<gateway>`), on a connection of its own, at most
/// every [`crate::store::identity::ANCHOR_EVERY`] and at stop; a failure
/// is logged and retried at the next tick.
struct FacilityAnchor {
    url: Result<String, String>,
    ca_pem: Option<Vec<u8>>,
    facility: String,
    gateway: String,
    window_ms: i64,
    timeouts: (Duration, Duration),
    conn: Option<crate::facility::Facility>,
    sent: Option<crate::store::identity::Head>,
}

impl FacilityAnchor {
    fn new(cfg: &crate::config::Config, redis: &crate::config::RedisSettings) -> FacilityAnchor {
        FacilityAnchor {
            url: crate::facility::primary_url(redis).map_err(|e| e.to_string()),
            ca_pem: redis.ca_pem.clone(),
            facility: cfg.gateway.facility.clone(),
            gateway: cfg.gateway.id.clone(),
            window_ms: cfg.window_ms(),
            timeouts: (
                redis.config.connect_timeout(),
                redis.config.command_timeout(),
            ),
            conn: None,
            sent: None,
        }
    }

    fn put(&mut self, anchor: &crate::store::identity::Anchor) {
        let Some(head) = anchor.head() else { return };
        if self.sent.as_ref() == Some(head) {
            return;
        }
        let done = (|| -> Result<(), String> {
            if self.conn.is_none() {
                let url = self.url.clone()?;
                self.conn = Some(
                    crate::facility::Facility::connect_with_ca(
                        &url,
                        self.ca_pem.clone(),
                        &self.facility,
                        self.window_ms,
                        Duration::ZERO,
                        self.timeouts.0,
                        self.timeouts.1,
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
                crate::events::AnchorFailed {
                    place: crate::events::AnchorPlace::Facility,
                    error: &e,
                }
                .emit();
            }
        }
    }
}

/// The stop order, written once:
/// 1. The stop token is set: each scanner's source stops reading (a frame
///    not finished is never acknowledged, so the scanner sends it again)
///    and ends, dropping its sender; the sweeper stops between two chunks
///    (its page check after start runs to its end: it is awaited last).
/// 2. The outbox writer admits — and, with the embedded store, decides —
///    everything still queued, and ends once every sender is gone (`tx`,
///    the daemon's own, goes first).
/// 3. With `[redis]`, the claimer's live lane is stopped: it makes one last
///    round (claiming what the writer admitted last) and ends; then the
///    replay lane, likewise (the live lane's last round may have freed
///    backlog scans held back behind it).
///
/// Whatever is left undecided stays durable in the outbox for the next
/// start. Returns every stage's end, in the order they came.
async fn stop_in_order(
    stages: &mut Supervisor,
    stopper: &Stopper,
    tx: mpsc::Sender<Captured>,
    mut lanes: Option<claimer::LaneStop>,
) -> Vec<StageEnded> {
    let mut ended = Vec::new();
    stopper.stop();
    drop(tx);
    let mut until_ended = async |stages: &mut Supervisor, which: fn(&Stage) -> bool| {
        while stages.any_running(which) {
            ended.extend(stages.next().await);
        }
    };
    until_ended(stages, |s| matches!(s, Stage::Scanner(_) | Stage::Writer)).await;
    if let Some(lanes) = &mut lanes {
        lanes.stop(LaneKind::Live);
        until_ended(stages, |s| *s == Stage::LiveLane).await;
        lanes.stop(LaneKind::Replay);
    }
    until_ended(stages, |_| true).await;
    ended
}

/// A stage that ended before the stop: logged, and the failure the daemon
/// exits with.
fn ended_early(ended: StageEnded, state_dir: &Path) -> DaemonError {
    let StageEnded { stage, result } = ended;
    match (stage, result) {
        (_, StageResult::Corrupt { path, detail }) => {
            events::StageFailed::Corrupt {
                db: &path,
                detail: &detail,
                stopping: true,
            }
            .emit();
            DaemonError::CorruptWhileRunning { path, detail }
        }
        // A scanner's task runs until shutdown (it reconnects by itself);
        // one that ends is a bug: stop, so the service manager restarts
        // the gateway with every scanner, rather than run without it.
        (Stage::Scanner(_), result) => {
            let detail = match result {
                StageResult::Panicked(why) => why,
                _ => "it returned".to_string(),
            };
            events::StageFailed::ScannerEnded { detail: &detail }.emit();
            DaemonError::SourceEnded(detail)
        }
        (Stage::Writer, result) => {
            events::StageFailed::WriterStopped.emit();
            match result {
                StageResult::Panicked(why) => {
                    events::StageFailed::Panicked {
                        stage: &"outbox writer",
                        why: &why,
                    }
                    .emit();
                    DaemonError::WriterPanicked(state_dir.to_owned())
                }
                // It returns early only when nobody decides its scans: the
                // claimer's live lane is gone.
                _ => DaemonError::ClaimerPanicked(state_dir.to_owned()),
            }
        }
        (Stage::LiveLane | Stage::ReplayLane, result) => {
            events::StageFailed::ClaimerStopped.emit();
            if let StageResult::Panicked(why) = result {
                events::StageFailed::Panicked {
                    stage: &"facility claimer",
                    why: &why,
                }
                .emit();
            }
            DaemonError::ClaimerPanicked(state_dir.to_owned())
        }
        (Stage::Sweeper, result) => {
            let why = match result {
                StageResult::Panicked(why) => why,
                _ => "it returned".to_string(),
            };
            events::StageFailed::SweeperStopped { why: &why }.emit();
            DaemonError::SweeperPanicked(why)
        }
    }
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
        facility_id: String,
        /// Wakes the claimer's live lane.
        kick: claimer::Kicker,
    },
}

/// What the outbox writer reports to and checks besides its database.
#[derive(Clone, Copy)]
struct WriterHooks<'a> {
    /// Counts and latencies it publishes.
    telemetry: &'a Telemetry,
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
    mut rx: mpsc::Receiver<Captured>,
    stopping: Stop,
    hooks: WriterHooks<'_>,
    recovered: oneshot::Sender<()>,
) -> (GateStats, usize) {
    let WriterHooks {
        telemetry,
        progress,
        floor,
    } = hooks;
    let mut undurable = 0;
    // Crash recovery: scans made durable before a crash are decided first,
    // in capture order, before anything new.
    let mut undecided = {
        let _turn = progress.turn();
        match &mut decider {
            Decider::Here(gate) => decide_leftovers(&mut store, gate, telemetry),
            Decider::Claimer { kick, .. } => {
                kick.kick();
                false
            }
        }
    };
    let _ = recovered.send(());
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
                        let _turn = progress.turn();
                        undecided = decide_leftovers(&mut store, gate, telemetry);
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
        match write_until_durable(&mut store, &mut decider, &scans, &stopping, progress, floor) {
            Ok(decisions) => {
                crate::events::Decided {
                    decisions: &decisions,
                }
                .emit(telemetry);
                for durable in acks.iter().filter_map(|(d, _)| d.as_ref()) {
                    durable.confirm(); // the scanner may have gone; it will resend
                }
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
        Decider::Here(gate) => {
            if undecided {
                let _turn = progress.turn();
                decide_leftovers(&mut store, gate, telemetry);
            }
            (gate.stats(), undurable)
        }
        Decider::Claimer { .. } => (GateStats::default(), undurable),
    }
}

/// Decide whatever is pending; true if something is still left undecided.
fn decide_leftovers(store: &mut Store, gate: &mut Gate, telemetry: &Telemetry) -> bool {
    match embedded::decide_pending(store, gate) {
        Ok(decided) => crate::events::Decided {
            decisions: &decided,
        }
        .emit(telemetry),
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
                Decider::Claimer { facility_id, .. } => {
                    store.admit(facility_id, scans).map(|_| Vec::new())
                }
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
                std::thread::sleep(pause.failed());
            }
        }
    }
}
