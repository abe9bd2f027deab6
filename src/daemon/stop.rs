//! Stopping the daemon: the stop order, written once ([`in_order`]);
//! systemd's stop timeout extended while a long drain makes progress
//! ([`extending`]); a stage that ended early as the failure it is
//! ([`ended_early`]); and the run's outcome from every stage's end
//! ([`outcome`]).

use super::supervisor::{Stage, StageEnded, StageResult, Supervisor};
use super::{DaemonError, RunReport};
use crate::claimer;
use crate::claimer::LaneKind;
use crate::events::{self, Event as _};
use crate::model::GateStats;
use crate::notify::{Notifier, Watch};
use crate::shutdown::Stopper;
use crate::source::Inbound;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// At the stop: after this long, and then every this long, the stop
/// timeout is extended by [`EXTEND_BY`] while the stages still make
/// progress, up to [`EXTEND_AT_MOST`] in all.
const EXTEND_EVERY: Duration = Duration::from_secs(2);
const EXTEND_BY: Duration = Duration::from_secs(20);
const EXTEND_AT_MOST: Duration = Duration::from_secs(600);

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
pub(super) async fn in_order(
    stages: &mut Supervisor,
    stopper: &Stopper,
    tx: mpsc::Sender<Inbound>,
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
pub(super) fn ended_early(ended: StageEnded, state_dir: &Path) -> DaemonError {
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
        (Stage::Sink(name), result) => {
            let why = match result {
                StageResult::Panicked(why) => why,
                _ => "it returned".to_string(),
            };
            let why = format!("sink {name}: {why}");
            events::StageFailed::SinkStopped { why: &why }.emit();
            DaemonError::SinkEnded(why)
        }
    }
}

/// Once every stage has ended: the first failure, or the run's counters.
/// A stage that ended early decides the failure, else one that failed
/// while stopping; scans that could not be made durable at the stop are
/// one too.
pub(super) fn outcome(
    ended: Vec<StageEnded>,
    early: Option<DaemonError>,
    state_dir: PathBuf,
    db_path: PathBuf,
) -> Result<RunReport, DaemonError> {
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
                    Stage::Sink(name) => {
                        failed =
                            failed.or(Some(DaemonError::SinkEnded(format!("sink {name}: {why}"))));
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

/// Await `stopping`; meanwhile, while the stages still make progress,
/// extend systemd's stop timeout every [`EXTEND_EVERY`] by [`EXTEND_BY`],
/// up to [`EXTEND_AT_MOST`] in all (a long drain is not killed).
pub(super) async fn extending(
    stopping: impl Future<Output = Vec<StageEnded>>,
    notifier: &Notifier,
    watch: &mut Watch,
) -> Vec<StageEnded> {
    let mut stopping = std::pin::pin!(stopping);
    let began = Instant::now();
    let mut extend =
        tokio::time::interval_at(tokio::time::Instant::now() + EXTEND_EVERY, EXTEND_EVERY);
    loop {
        tokio::select! {
            ended = &mut stopping => return ended,
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
}
