//! Every stage's end, on one channel: each stage runs on a thread or task
//! started here, and whatever way it ends — returned, panicked — the
//! supervisor hears a [`StageEnded`]. The daemon waits on it for a stage
//! that ends before the stop, and, while stopping, for each stage in the
//! stop order.

use crate::model::GateStats;
use std::collections::HashSet;
use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use tokio::sync::mpsc;

/// A stage of the running pipeline.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Stage {
    /// A scanner's source task, by scanner name.
    Scanner(String),
    /// The outbox writer thread.
    Writer,
    /// The facility claimer's live lane.
    LiveLane,
    /// The facility claimer's replay lane.
    ReplayLane,
    /// The page check and raw-bytes sweeper thread.
    Sweeper,
    /// A `[[sink]]`'s thread, by sink name.
    Sink(String),
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stage::Scanner(name) => write!(f, "scanner {name}"),
            Stage::Writer => f.write_str("outbox writer"),
            Stage::LiveLane => f.write_str("facility claimer's live lane"),
            Stage::ReplayLane => f.write_str("facility claimer's replay lane"),
            Stage::Sweeper => f.write_str("raw-bytes sweeper"),
            Stage::Sink(name) => write!(f, "sink {name}"),
        }
    }
}

/// How a stage ended.
#[derive(Debug)]
pub enum StageResult {
    /// It returned, with nothing to report.
    Done,
    /// The outbox writer returned: the gate's counters (embedded store) and
    /// how many scans it could not make durable (only when shutdown met a
    /// database that refused writes).
    Writer {
        /// Gate counters (zero with a facility store: the lanes decide).
        stats: GateStats,
        /// Scans read but never made durable nor acknowledged.
        undurable: usize,
    },
    /// A claimer lane returned its counters.
    Lane(GateStats),
    /// The page check found the database damaged.
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        detail: String,
    },
    /// It panicked, with this message.
    Panicked(String),
}

/// One stage's end.
#[derive(Debug)]
pub struct StageEnded {
    /// Which stage.
    pub stage: Stage,
    /// How it ended.
    pub result: StageResult,
}

/// Starts the stages and hears how each ends.
pub struct Supervisor {
    tx: mpsc::UnboundedSender<StageEnded>,
    rx: mpsc::UnboundedReceiver<StageEnded>,
    running: HashSet<Stage>,
}

impl Default for Supervisor {
    fn default() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Supervisor {
            tx,
            rx,
            running: HashSet::new(),
        }
    }
}

impl Supervisor {
    /// Run `stage` on an OS thread (blocking work: SQLite, the redis client).
    pub fn thread(
        &mut self,
        stage: Stage,
        name: &str,
        run: impl FnOnce() -> StageResult + Send + 'static,
    ) {
        self.running.insert(stage.clone());
        let tx = self.tx.clone();
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run))
                    .unwrap_or_else(|payload| StageResult::Panicked(panic_message(&*payload)));
                let _ = tx.send(StageEnded { stage, result });
            })
            .expect("spawning a thread");
    }

    /// Run `stage` as a task on the async runtime.
    pub fn task(&mut self, stage: Stage, run: impl Future<Output = ()> + Send + 'static) {
        self.running.insert(stage.clone());
        let tx = self.tx.clone();
        let task = tokio::spawn(run);
        tokio::spawn(async move {
            let result = match task.await {
                Ok(()) => StageResult::Done,
                Err(e) if e.is_panic() => StageResult::Panicked(panic_message(&*e.into_panic())),
                Err(e) => StageResult::Panicked(e.to_string()),
            };
            let _ = tx.send(StageEnded { stage, result });
        });
    }

    /// The next stage to end (`None`: none is running).
    pub async fn next(&mut self) -> Option<StageEnded> {
        if self.running.is_empty() {
            return None;
        }
        let ended = self.rx.recv().await?;
        self.running.remove(&ended.stage);
        Some(ended)
    }

    /// Whether a stage that `matches` still runs.
    pub fn any_running(&self, matches: impl Fn(&Stage) -> bool) -> bool {
        self.running.iter().any(matches)
    }
}

/// The text of a panic's payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    match (
        payload.downcast_ref::<&str>(),
        payload.downcast_ref::<String>(),
    ) {
        (Some(s), _) => format!("panicked: {s}"),
        (_, Some(s)) => format!("panicked: {s}"),
        _ => "panicked".into(),
    }
}
