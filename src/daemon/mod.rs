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
//! the [`crate::claimer`]: two threads (its live lane for new scans, its replay
//! lane for an outage's backlog), each with its own connection and blocking
//! redis client, deciding in pipelined claim rounds; the connections take
//! turns at writing (`Store::write`). The [`sweeper`] thread first reads
//! every page of the database (damage stops the daemon with exit 3), then
//! overwrites decided scans' raw bytes after `[outbox] keep_raw_hours`, one
//! short write turn at a time.
//!
//! **Publishing** ([`publish`], [`metrics_http`]): sources, writer and
//! claimer report to one [`crate::telemetry::Telemetry`]; the publisher
//! (database samples, status file, `[metrics] textfile`), the
//! `[metrics] listen` server and the tap socket ([`tap`]: `scangate tap`
//! and `top` attached) run as tasks beside the stages, not as stages:
//! their failures are logged and retried, never a reason to stop reading
//! scans.
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
//! scanners added, removed or changed start and stop alone, each
//! `[[sink]]` gets its keys and files read again and tries a blocked batch
//! at once (`sinks.rs`), anything else changed is refused ([`reload`]).
//!
//! **Starting and stopping.** [`run_with`] is the list of starts: each
//! stage starts itself from its section of the settings (`writer.rs`,
//! [`crate::claimer::start`], [`sweeper`], `anchor.rs`, [`publish`]) through the
//! [`supervisor`], which hears how each ends. The daemon then runs
//! (`running.rs`) until the shutdown signal or a stage ending early (a
//! failure), and stops the stages in the order `stop.rs` writes down; how
//! each stage hears its stop is said once in [`crate::shutdown`].

mod anchor;
pub mod embedded;
mod error;
pub mod metrics_http;
pub(crate) mod publish;
pub(crate) mod reload;
mod running;
mod sinks;
mod stop;
pub(crate) mod supervisor;
pub mod sweeper;
pub mod tap;
mod writer;

pub use error::DaemonError;
pub use writer::ADMIT_BATCH;

use crate::config::Settings;
use crate::events::{self, Event as _};
use crate::gate::{Gate, GateConfig};
use crate::model::GateStats;
use crate::notify::{Notifier, Watch};
use crate::store::Store;
use crate::telemetry::Telemetry;
use running::Running;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;
use supervisor::Supervisor;
use tokio::sync::mpsc;
use writer::Decider;

/// What a run did.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunReport {
    /// Gate counters.
    pub stats: GateStats,
}

/// How long `READY=1` waits for every scanner to connect after recovery
/// (a scanner that is not plugged in is retried by its task meanwhile).
pub const SCANNERS_SETUP: Duration = Duration::from_secs(3);
/// A loop is wedged only after this long at least without progress while
/// it has work: longer than any back-off between two of its turns (the
/// writer's 5 s after a failed write).
const MIN_STALL: Duration = Duration::from_secs(10);

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
///
/// The stages are started in this order, each from its own section of
/// the settings; the daemon then runs until the shutdown signal or a stage
/// ending early, and stops them in the order `stop::in_order` writes
/// down.
pub async fn run_with(
    settings: Settings,
    shutdown: impl Future<Output = ()>,
    reloads: Option<Reloads>,
) -> Result<RunReport, DaemonError> {
    let notifier = Notifier::from_env();
    let mut wiring = Wiring {
        stages: Supervisor::default(),
        watch: Watch::default(),
        watchdog: crate::notify::watchdog_interval(),
    };
    let cfg = &settings.config;
    let file = reloads.as_ref().and_then(|r| r.config.as_deref());
    let scanner_names: Vec<String> = cfg.scanners.iter().map(|s| s.name.clone()).collect();
    let telemetry = Telemetry::new(
        &scanner_names,
        cfg.redis.as_ref().map(|r| r.max_clock_error_ms),
    );
    tell_carried(cfg, file, &telemetry);
    tell_exposed(cfg, file);
    let state_dir = cfg.state_dir();
    let mut store = Store::open_with_floor(&state_dir, cfg.outbox.min_free_mb)?;
    for loose in crate::store::modes::loose(&state_dir) {
        events::StateExposed {
            path: &loose.path,
            mode: loose.mode,
            warning: &loose,
        }
        .emit();
    }
    if cfg.redis.is_none() {
        let waiting = store.unresolved()?;
        if waiting > 0 {
            events::StartWarning::NoFacilityStore { waiting }.emit();
        }
    }
    telemetry.unacknowledged_alerts(
        &crate::checks::open::counts(&store.conn).map_err(|e| store.err_at(e))?,
    );
    let mut gate = Gate::new(GateConfig::from_config(cfg), &store)?;
    gate.bridge_earlier_keys(&mut store, cfg)?;
    // The checks at the counter, each scanner's set again at a reload.
    let checks = std::sync::Arc::new(crate::checks::Checks::new(&state_dir, &cfg.checks));
    for sc in &cfg.scanners {
        checks.set_scanner(&sc.name, sc.checks.as_deref());
    }
    gate.set_checks(checks.clone());
    events::Starting {
        db: store.path(),
        facility: &cfg.gateway.facility,
        gateway: &cfg.gateway.id,
        scanners: cfg.scanners.len(),
        window_ms: cfg.dedup.window_ms,
        facility_redis: cfg.redis.is_some(),
    }
    .emit();
    telemetry.set_sinks(&cfg.sinks.iter().map(|s| s.name.clone()).collect::<Vec<_>>());
    let listener = match cfg.metrics.listen {
        Some(addr) => Some(metrics_http::bind(addr).await?),
        None => None,
    };
    let (stopper, stop) = crate::shutdown::channel();
    // Decisions back to the scanners (their `feedback`).
    let signals = crate::source::signal::Signals::default();
    // With [redis], the claimer's lanes decide; the writer only admits.
    let (decider, claimer) = match &settings.redis {
        None => (Decider::Here(Box::new(gate)), None),
        Some(redis) => {
            let started =
                crate::claimer::start(&mut store, gate, cfg, redis, &telemetry, &signals).await?;
            run_lanes(&mut wiring, started.lanes);
            let decider = Decider::Claimer {
                facility_id: cfg.gateway.facility.clone(),
                kick: started.kick,
            };
            (decider, Some((started.link, started.lane_stop)))
        }
    };
    if cfg.scanners.is_empty() {
        events::StartWarning::NoScanners.emit();
    }
    sweeper::start(&mut wiring.stages, &store, cfg, stop.clone())?;
    let sinks = sinks::start(&mut wiring.stages, &store, &settings, &telemetry, &stop)?;
    let anchoring = anchor::start(
        &state_dir,
        cfg,
        settings.redis.as_ref(),
        &telemetry,
        stop.clone(),
    )?;
    let publishing = publish::start(cfg, &telemetry, listener, &stop);
    let db_path = store.path().to_owned();
    let floor = crate::store::space::Floor::new(&state_dir, cfg.outbox.min_free_mb);
    let reports = writer::Reports {
        telemetry: &telemetry,
        signals: &signals,
        gateway: &cfg.gateway.id,
    };
    let (tx, writer_recovered) =
        writer::start(&mut wiring, store, decider, reports, floor, stop.clone());
    let out = crate::source::ToOutbox::new(tx)
        .with_telemetry(telemetry.clone())
        .with_controls(std::sync::Arc::new(cfg.controls.clone()))
        .with_signals(signals.clone());
    let mut scanners = reload::Scanners::new(out, &cfg.gateway.id, checks);
    for sc in &cfg.scanners {
        scanners.start(&mut wiring.stages, &stopper, sc.clone());
    }

    let (link, lane_stop) = claimer.unzip();
    let early = Running {
        notifier: &notifier,
        watch: &mut wiring.watch,
        watchdog: wiring.watchdog,
        telemetry: &telemetry,
        stages: &mut wiring.stages,
        stopper: &stopper,
        scanners: &mut scanners,
        facility_link: link.as_ref(),
        sinks: &sinks,
        settings: settings.clone(),
        reloads,
    }
    .until_stop(shutdown, writer_recovered)
    .await;
    let early = early.map(|ended| stop::ended_early(ended, &state_dir));
    notifier.stopping("stopping: closing scanners, draining the outbox");
    // The daemon's sender is held until the stop: with no scanner
    // configured the writer still waits, the claimer still replays a
    // backlog.
    let stopping = stop::in_order(
        &mut wiring.stages,
        &stopper,
        scanners.into_sender(),
        lane_stop,
    );
    let ended = stop::extending(stopping, &notifier, &mut wiring.watch).await;
    anchoring.finish();
    publish::finish(publishing).await;
    stop::outcome(ended, early, state_dir, db_path)
}

/// A WARN for each file `cfg` (read from `file`) names that others may
/// read or change further than it should ([`crate::config::exposure`]):
/// at start and at each reload. Told, not refused: a mode the site set
/// must not stop the gateway after an upgrade.
pub(crate) fn tell_exposed(cfg: &crate::config::Config, file: Option<&std::path::Path>) {
    for exposed in crate::config::exposure::exposed(cfg, file) {
        events::ConfigFileExposed {
            path: &exposed.path,
            mode: exposed.mode,
            warning: &exposed.warning(),
        }
        .emit();
    }
}

/// Tell the keys of an earlier release `cfg`'s file carries over
/// ([`crate::config::Carried`]), each with its fix, and count them: at
/// start and at each reload.
pub(crate) fn tell_carried(
    cfg: &crate::config::Config,
    file: Option<&std::path::Path>,
    telemetry: &Telemetry,
) {
    let warnings: Vec<String> = cfg.carried.iter().map(|old| old.warning(file)).collect();
    let keys: Vec<events::OldConfigKey<'_>> = cfg
        .carried
        .iter()
        .zip(&warnings)
        .map(|(old, warning)| events::OldConfigKey {
            key: &old.key,
            warning,
        })
        .collect();
    events::OldConfigKeys {
        keys: &keys,
        telemetry,
    }
    .emit();
}

/// Run the facility claimer's two lanes as stages, each on a thread of its
/// own under the supervisor, watched by the systemd watchdog's progress
/// rule with its own stall bound.
fn run_lanes(wiring: &mut Wiring, lanes: [crate::claimer::LaneRun; 2]) {
    for lane in lanes {
        let stall = wiring.stall(lane.stall_bound());
        wiring.watch.add(lane.progress(), stall, None);
        let stage = match lane.kind() {
            crate::claimer::LaneKind::Live => supervisor::Stage::LiveLane,
            crate::claimer::LaneKind::Replay => supervisor::Stage::ReplayLane,
        };
        wiring.stages.thread(stage, &lane.thread_name(), move || {
            supervisor::StageResult::Lane(lane.run())
        });
    }
}

/// What starting a stage takes of the daemon: the supervisor that hears
/// how it ends, and the watch whose progress rule the systemd watchdog
/// keeps.
pub(crate) struct Wiring {
    /// Every stage's end.
    pub(crate) stages: Supervisor,
    /// The loops whose progress the watchdog watches.
    pub(crate) watch: Watch,
    /// systemd's watchdog interval (`WATCHDOG_USEC`), if set.
    watchdog: Option<Duration>,
}

impl Wiring {
    /// How long a watched loop may go without progress while it has work:
    /// `at_least` and [`MIN_STALL`], and never less than the watchdog's
    /// interval.
    pub(crate) fn stall(&self, at_least: Duration) -> Duration {
        self.watchdog
            .unwrap_or(Duration::ZERO)
            .max(MIN_STALL.max(at_least))
    }
}
