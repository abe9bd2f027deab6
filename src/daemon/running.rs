//! The running daemon, between the start and the stop: it waits for the
//! shutdown signal or a stage that ends early, tells systemd when it is
//! ready and keeps its status line and watchdog current, and applies
//! reloads (SIGHUP).

use super::reload::{self, Scanners};
use super::supervisor::{Stage, StageEnded, StageResult, Supervisor};
use super::{Reloads, SCANNERS_SETUP};
use crate::claimer;
use crate::config::Settings;
use crate::events::{self, Event as _};
use crate::notify::{Notifier, Watch};
use crate::shutdown::Stopper;
use crate::telemetry::{Summary, Telemetry};
use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How often the status line is looked at (sent when it changed).
const STATUS_EVERY: Duration = Duration::from_millis(250);

/// What the running daemon holds between the start and the stop.
pub(super) struct Running<'a> {
    pub(super) notifier: &'a Notifier,
    pub(super) watch: &'a mut Watch,
    /// systemd's watchdog interval (`WATCHDOG_USEC`), if set.
    pub(super) watchdog: Option<Duration>,
    pub(super) telemetry: &'a Telemetry,
    pub(super) stages: &'a mut Supervisor,
    pub(super) stopper: &'a Stopper,
    pub(super) scanners: &'a mut Scanners,
    /// With `[redis]`: the claimer's link, told of reloaded scanners.
    pub(super) facility_link: Option<&'a claimer::Link>,
    /// The configuration running now (a reload replaces it).
    pub(super) settings: Settings,
    pub(super) reloads: Option<Reloads>,
    /// The `[[sink]]`s, given their settings again at a reload.
    pub(super) sinks: &'a super::sinks::Sinks,
}

impl Running<'_> {
    /// Run until `shutdown` completes (`None`) or a stage ends before the
    /// stop (that stage's end: a failure). Every stage runs until the stop:
    /// a scanner's task reconnects by itself, unless a reload stopped it;
    /// the writer and the claimer's lanes run until stopped; the sweeper
    /// ends early only when the page check found damage. `READY=1` goes
    /// out once the writer has heard what a crash left (`writer_recovered`)
    /// and every scanner is connected, or [`SCANNERS_SETUP`] has passed.
    pub(super) async fn until_stop(
        mut self,
        shutdown: impl Future<Output = ()>,
        mut writer_recovered: oneshot::Receiver<()>,
    ) -> Option<StageEnded> {
        let mut shutdown = std::pin::pin!(shutdown);
        let mut status_tick = tokio::time::interval(STATUS_EVERY);
        let mut ping = self.watchdog.map(|w| tokio::time::interval(w / 2));
        let (mut recovered_at, mut recovery_heard) = (None::<Instant>, false);
        let (mut ready, mut shown) = (false, String::new());
        loop {
            tokio::select! {
                _ = &mut shutdown => {
                    events::Lifecycle::Stopping.emit();
                    return None;
                }
                Some(ended) = self.stages.next() => {
                    if let Stage::Scanner(name) = &ended.stage
                        && self.scanners.ended(self.stages, self.stopper, name)
                    {
                        if let StageResult::Panicked(why) = &ended.result {
                            events::StageFailed::ScannerPanickedOnReload { scanner: name, why }.emit();
                        }
                        continue;
                    }
                    return Some(ended);
                }
                heard = &mut writer_recovered, if !recovery_heard => {
                    // (Err: the writer ended first; its end is heard above.)
                    recovery_heard = true;
                    recovered_at = heard.is_ok().then(Instant::now);
                }
                Some(()) = next_reload(&mut self.reloads) => {
                    if ready {
                        self.notifier.reloading();
                    }
                    self.reload().await;
                    if ready {
                        shown = status_line(&self.telemetry.summary(), self.watch.wedged());
                        self.notifier.ready(&shown);
                    }
                }
                _ = status_tick.tick() => {
                    let line = status_line(&self.telemetry.summary(), self.watch.wedged());
                    if !ready && let Some(at) = recovered_at {
                        let summary = self.telemetry.summary();
                        if summary.scanners_up == summary.scanners || at.elapsed() >= SCANNERS_SETUP {
                            ready = true;
                            events::Lifecycle::Ready { status: &line }.emit();
                            self.notifier.ready(&line);
                            shown = line;
                        }
                    } else if ready && line != shown {
                        self.notifier.status(&line);
                        shown = line;
                    }
                }
                _ = tick(&mut ping), if ready => {
                    if self.watch.check(Instant::now()).is_empty() {
                        self.notifier.watchdog();
                    }
                }
            }
        }
    }

    /// Read the configuration again and apply what may change while
    /// running (scanners); refuse the rest, naming the keys.
    async fn reload(&mut self) {
        let path = self.reloads.as_ref().and_then(|r| r.config.clone());
        let Some(new) = reloaded(&self.settings, path, self.telemetry).await else {
            return;
        };
        match reload::plan(&self.settings, &new) {
            Ok(plan) => {
                events::Reloaded {
                    added: plan.added.len(),
                    removed: plan.removed.len(),
                    changed: plan.changed.len(),
                    described: &plan.describe(),
                    scanners: &new
                        .config
                        .scanners
                        .iter()
                        .map(|s| s.name.clone())
                        .collect::<Vec<_>>(),
                    telemetry: self.telemetry,
                }
                .emit();
                if let Some(link) = self.facility_link {
                    link.set_scanners(&new.config);
                }
                let added: Vec<String> = plan.added.iter().map(|s| s.name.clone()).collect();
                self.scanners.apply(self.stages, self.stopper, plan);
                if !added.is_empty() {
                    reopened_alerts(self.telemetry, new.config.state_dir(), added).await;
                }
                self.sinks.reload(&new.sinks);
                self.settings = new;
            }
            Err(keys) => events::ReloadRefused::NeedsRestart { keys: &keys }.emit(),
        }
    }
}

/// Scanners a reload added, which may have alerts still open from when
/// they were configured before: their count as the database keeps it (a
/// read-only connection, on a blocking thread).
async fn reopened_alerts(telemetry: &Telemetry, state_dir: std::path::PathBuf, added: Vec<String>) {
    let read = tokio::task::spawn_blocking(move || {
        let store = crate::store::Store::open_read_only(&state_dir)?;
        crate::checks::open::counts(&store.conn).map_err(|e| store.err_at(e))
    })
    .await;
    match read {
        Ok(Ok(open)) => {
            let theirs: Vec<(String, u64)> = open
                .into_iter()
                .filter(|(n, _)| added.contains(n))
                .collect();
            telemetry.unacknowledged_alerts(&theirs);
        }
        Ok(Err(e)) => events::OpenAlertsUnread {
            scanners: &added,
            error: &e,
        }
        .emit(),
        Err(e) => events::OpenAlertsUnread {
            scanners: &added,
            error: &e,
        }
        .emit(),
    }
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

/// The configuration read again from `path` and resolved, as at start
/// (its old keys and exposed files told, the old keys counted in
/// `telemetry`); `None` (logged as an ERROR naming the file and key) if
/// it is broken: the daemon keeps running on `running`.
async fn reloaded(
    running: &Settings,
    path: Option<PathBuf>,
    telemetry: &Telemetry,
) -> Option<Settings> {
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
        (read, line, path)
    })
    .await;
    match read {
        Ok((Ok(new), _, path)) => {
            super::tell_carried(&new.config, path.as_deref(), telemetry);
            super::tell_exposed(&new.config, path.as_deref());
            Some(new)
        }
        Ok((Err(e), line, _)) => {
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
