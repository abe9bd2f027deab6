//! systemd's notification protocol (sd_notify(3), through the sd-notify
//! crate): readiness, a one-line status, reloading and stopping, stop
//! timeout extensions, and the watchdog. With no `NOTIFY_SOCKET` in the
//! environment (not started by systemd with `Type=notify`) every message
//! is a no-op.
//!
//! **The watchdog proves progress, not liveness.** The loops that move
//! scans — the outbox writer and the claimer's two lanes — each carry a
//! [`Progress`]: a count of finished turns (a write attempt, a claim
//! pass), whether a turn is under way, and whether work waits for the
//! loop (scans queued for the writer, a kick a lane has not taken up).
//! [`Watch::check`] calls a loop *wedged* when, for longer than its bound,
//! it finished no turn while it was in one or work waited for it. An idle
//! loop (nothing waiting) is never wedged, and neither is one whose turns
//! keep failing and returning (a Redis outage: the lane's passes end
//! after their timeouts and it backs off; a disk that refuses writes: the
//! writer retries, logging each failure) — a restart would not help them.
//! The daemon sends `WATCHDOG=1` every half `WATCHDOG_USEC` only while no
//! loop is wedged, from its own task on the async runtime, so a stuck
//! runtime (the scanners' tasks) stops the pings too.

use crate::events::Event as _;
use sd_notify::NotifyState;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Sends notifications to the service manager (when there is one).
#[derive(Debug, Clone)]
pub struct Notifier {
    enabled: bool,
}

impl Notifier {
    /// A notifier for this process: enabled when `NOTIFY_SOCKET` is set.
    pub fn from_env() -> Notifier {
        Notifier {
            enabled: std::env::var_os("NOTIFY_SOCKET").is_some(),
        }
    }

    /// Whether a service manager listens.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// `READY=1` with the current status line.
    pub fn ready(&self, status: &str) {
        self.send(&[NotifyState::Ready, NotifyState::Status(status)]);
    }

    /// `RELOADING=1` (and `MONOTONIC_USEC`, which systemd 253 and later
    /// want with it): a reload began; [`Notifier::ready`] ends it.
    pub fn reloading(&self) {
        match NotifyState::monotonic_usec_now() {
            Ok(now) => self.send(&[NotifyState::Reloading, now]),
            Err(_) => self.send(&[NotifyState::Reloading]),
        }
    }

    /// `STOPPING=1`.
    pub fn stopping(&self, status: &str) {
        self.send(&[NotifyState::Stopping, NotifyState::Status(status)]);
    }

    /// `STATUS=` one line.
    pub fn status(&self, line: &str) {
        self.send(&[NotifyState::Status(line)]);
    }

    /// `EXTEND_TIMEOUT_USEC=`: the stop may take `by` longer from now.
    pub fn extend_timeout(&self, by: Duration, status: &str) {
        let usec = u32::try_from(by.as_micros()).unwrap_or(u32::MAX);
        self.send(&[
            NotifyState::ExtendTimeoutUsec(usec),
            NotifyState::Status(status),
        ]);
    }

    /// `WATCHDOG=1`.
    pub fn watchdog(&self) {
        self.send(&[NotifyState::Watchdog]);
    }

    fn send(&self, states: &[NotifyState]) {
        if !self.enabled {
            return;
        }
        if let Err(e) = sd_notify::notify(states) {
            // (Debug: a manager that went away must not flood the log.)
            tracing::debug!("cannot notify the service manager (NOTIFY_SOCKET): {e}");
        }
    }
}

/// The watchdog interval systemd asks for (`WATCHDOG_USEC`, for this
/// process), if any. Pings go out at half of it.
pub fn watchdog_interval() -> Option<Duration> {
    sd_notify::watchdog_enabled().filter(|d| !d.is_zero())
}

/// A loop's progress, shared by the loop and the watchdog.
#[derive(Debug, Clone)]
pub struct Progress {
    inner: Arc<ProgressInner>,
}

#[derive(Debug)]
struct ProgressInner {
    name: &'static str,
    turns: AtomicU64,
    busy: AtomicBool,
    offered: AtomicU64,
    taken: AtomicU64,
}

impl Progress {
    /// The progress of the loop called `name` in logs ("outbox writer").
    pub fn new(name: &'static str) -> Progress {
        Progress {
            inner: Arc::new(ProgressInner {
                name,
                turns: AtomicU64::new(0),
                busy: AtomicBool::new(false),
                offered: AtomicU64::new(0),
                taken: AtomicU64::new(0),
            }),
        }
    }

    /// The loop's name.
    pub fn name(&self) -> &'static str {
        self.inner.name
    }

    /// A turn begins; it ends (and counts as progress) when the guard is
    /// dropped.
    pub fn turn(&self) -> ProgressTurn<'_> {
        self.inner.busy.store(true, Ordering::SeqCst);
        ProgressTurn(self)
    }

    /// A step of a long turn done (one round of a reconciliation that
    /// re-publishes a whole horizon): progress, though the turn goes on.
    pub fn advance(&self) {
        self.inner.turns.fetch_add(1, Ordering::SeqCst);
    }

    /// Work was handed to the loop (before waking it).
    pub fn offer(&self) {
        self.inner.offered.fetch_add(1, Ordering::SeqCst);
    }

    /// The loop has taken up everything offered so far (at the start of a
    /// turn).
    pub fn take_offers(&self) {
        let offered = self.inner.offered.load(Ordering::SeqCst);
        self.inner.taken.store(offered, Ordering::SeqCst);
    }

    fn turns(&self) -> u64 {
        self.inner.turns.load(Ordering::SeqCst)
    }

    fn has_work(&self) -> bool {
        self.inner.busy.load(Ordering::SeqCst)
            || self.inner.offered.load(Ordering::SeqCst) > self.inner.taken.load(Ordering::SeqCst)
    }
}

/// One turn of a loop ([`Progress::turn`]).
pub struct ProgressTurn<'a>(&'a Progress);

impl Drop for ProgressTurn<'_> {
    fn drop(&mut self) {
        self.0.inner.turns.fetch_add(1, Ordering::SeqCst);
        self.0.inner.busy.store(false, Ordering::SeqCst);
    }
}

/// Whether work waits for a loop outside its [`Progress`] (the writer's
/// queue holds scans).
pub type Waiting = Box<dyn Fn() -> bool + Send>;

/// One watched loop.
struct Watched {
    progress: Progress,
    waiting: Option<Waiting>,
    bound: Duration,
    last_turns: u64,
    stalled_since: Option<Instant>,
}

/// The watchdog's judgement over the loops that prove progress.
#[derive(Default)]
pub struct Watch {
    loops: Vec<Watched>,
    wedged: Vec<&'static str>,
}

impl Watch {
    /// Watch `progress`: wedged after `bound` without a finished turn
    /// while in a turn or while work waits (its offers, or `waiting`).
    pub fn add(&mut self, progress: Progress, bound: Duration, waiting: Option<Waiting>) {
        let last_turns = progress.turns();
        self.loops.push(Watched {
            progress,
            waiting,
            bound,
            last_turns,
            stalled_since: None,
        });
    }

    /// Look at every loop now; the names of those wedged (empty: all make
    /// progress or are idle). A loop that becomes wedged, or moves again,
    /// is logged once.
    pub fn check(&mut self, now: Instant) -> &[&'static str] {
        let mut wedged = Vec::new();
        for w in &mut self.loops {
            let turns = w.progress.turns();
            let has_work =
                w.progress.has_work() || w.waiting.as_ref().is_some_and(|waiting| waiting());
            if turns != w.last_turns || !has_work {
                w.last_turns = turns;
                w.stalled_since = None;
                continue;
            }
            let since = *w.stalled_since.get_or_insert(now);
            if now.duration_since(since) >= w.bound {
                wedged.push(w.progress.name());
            }
        }
        for name in &wedged {
            if !self.wedged.contains(name) {
                crate::events::Wedge::Stuck {
                    stage: name,
                    bound: self.bound_of(name),
                }
                .emit();
            }
        }
        for name in &self.wedged {
            if !wedged.contains(name) {
                crate::events::Wedge::Moves { stage: name }.emit();
            }
        }
        self.wedged = wedged;
        &self.wedged
    }

    /// The loops found wedged at the last [`Watch::check`].
    pub fn wedged(&self) -> &[&'static str] {
        &self.wedged
    }

    fn bound_of(&self, name: &str) -> Duration {
        self.loops
            .iter()
            .find(|w| w.progress.name() == name)
            .map_or(Duration::ZERO, |w| w.bound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_loop_is_never_wedged_a_stuck_turn_is_after_its_bound() {
        let p = Progress::new("outbox writer");
        let mut watch = Watch::default();
        watch.add(p.clone(), Duration::from_secs(2), None);
        let t0 = Instant::now();
        assert!(
            watch.check(t0 + Duration::from_secs(100)).is_empty(),
            "idle"
        );
        let turn = p.turn();
        assert!(watch.check(t0 + Duration::from_secs(101)).is_empty());
        assert!(watch.check(t0 + Duration::from_secs(102)).is_empty());
        assert_eq!(
            watch.check(t0 + Duration::from_secs(103)),
            ["outbox writer"]
        );
        drop(turn);
        assert!(
            watch.check(t0 + Duration::from_secs(104)).is_empty(),
            "it moved"
        );
    }

    #[test]
    fn a_long_turn_that_advances_is_not_wedged() {
        // A reconciliation re-publishing a whole horizon inside one pass.
        let p = Progress::new("claimer's live lane");
        let mut watch = Watch::default();
        watch.add(p.clone(), Duration::from_secs(2), None);
        let t0 = Instant::now();
        let _turn = p.turn();
        for s in 1..=10 {
            p.advance();
            assert!(
                watch.check(t0 + Duration::from_secs(s)).is_empty(),
                "a round every second is progress ({s} s)"
            );
        }
        // Rounds stop: wedged a bound after the stall was first seen.
        assert!(watch.check(t0 + Duration::from_secs(11)).is_empty());
        assert_eq!(watch.check(t0 + Duration::from_secs(13)).len(), 1);
    }

    #[test]
    fn work_offered_and_not_taken_up_is_a_stall_turns_that_end_are_progress() {
        let p = Progress::new("claimer's live lane");
        let mut watch = Watch::default();
        watch.add(p.clone(), Duration::from_secs(1), None);
        let t0 = Instant::now();
        p.offer();
        assert!(watch.check(t0).is_empty());
        assert_eq!(watch.check(t0 + Duration::from_secs(1)).len(), 1);
        p.take_offers();
        drop(p.turn()); // a failing pass that returned is still a turn
        assert!(watch.check(t0 + Duration::from_secs(2)).is_empty());
        let queued = Arc::new(AtomicBool::new(true));
        let q = queued.clone();
        let mut watch = Watch::default();
        watch.add(
            p,
            Duration::from_secs(1),
            Some(Box::new(move || q.load(Ordering::SeqCst))),
        );
        assert!(watch.check(t0).is_empty());
        assert_eq!(watch.check(t0 + Duration::from_secs(1)).len(), 1);
        queued.store(false, Ordering::SeqCst);
        assert!(watch.check(t0 + Duration::from_secs(2)).is_empty());
    }
}
