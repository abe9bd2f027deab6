//! One claimer lane: its connections, its gate, and the state that lives
//! between its passes. A pass ([`Lane::pass`]) is six steps, in this order:
//!
//! 1. [`Lane::connect_if_due`]: offline and the retry is due, connect;
//! 2. [`Lane::collect`]: pick the next round ([`pick`]: the lane's open
//!    scans, what this gateway decides alone, what must be claimed);
//! 3. [`Lane::receive`]: the answers to the round in flight;
//! 4. [`Lane::send`]: the next round's claims go out (Redis runs them while
//!    step 5 writes), or, without claims or a connection, its verdicts are
//!    made here;
//! 5. [`Lane::write`]: the answered round's verdicts, in one transaction:
//!    the live lane's handed to the outbox writer ("One writer" in
//!    docs/design.md) while it runs, else the lane's own ([`record`]);
//! 6. [`Lane::account`]: whether the facility store answers (an outage
//!    begins or ends, the retry backs off), and the local database's own
//!    back-off.
//!
//! Its upkeep (connecting, the clock, the probe and reconciliation, the
//! trim, the notices) is in `lane/upkeep.rs`.
//!
//! Then [`Lane::pass`] says whether to go on at once, end, or how long to
//! wait for a kick at most (a retry, the clock); the thread waits
//! (`claimer::run`) and tells the lane what woke it ([`Lane::woken`]).
//! Round k+1 is sent only after round k is answered, so a failure never
//! lets a later claim overtake an earlier one. [`pick`], [`record`] and
//! [`round`] are the steps' transactions, for tests and tools that drive
//! the rounds themselves.

mod upkeep;

use super::FacilityGate;
use super::claims::{LaneKind, Picked, Recorded, Round};
use super::reconcile::{self, markers};
use super::records;
use super::{LaneNotes, Link, Peers, Wake, backlog, publish};
use crate::backoff::Backoff;
use crate::capture::CaptureTime;
use crate::events::{Event as _, Recording};
use crate::facility::{Facility, FacilityError, Outcome, Sent};
use crate::model::{Decision, GateStats, Verdict};
use crate::notify::Progress;
use crate::store::handoff::Handoff;
use crate::store::{Store, StoreError};
use rusqlite::Connection;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The facility store's retry schedule, and the local database's.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// How often scans held for an unsynchronised clock are looked at again.
const CLOCK_POLL: Duration = Duration::from_secs(1);
/// How often the live lane measures the facility's clock while connected.
const CLOCK_SAMPLE_EVERY: Duration = Duration::from_secs(60);
/// How often the live lane checks, between claims, that the facility store
/// still has this gateway's latest commit, and reads the conflicts other
/// gateways' reconciliations found (also at its first pass).
const PROBE_EVERY: Duration = Duration::from_secs(60);
/// How often the live lane trims the facility ledger stream (and records
/// what it found for `status`), also at its first pass.
const TRIM_EVERY: Duration = Duration::from_secs(60);

/// Whether the lane can send claims.
enum LinkState {
    /// No connection: why (the reason new scans are audited unresolved
    /// with) and when to try again.
    Offline { reason: String, retry_at: Instant },
    /// Connected. (Claims may still be refused: see [`Outage`].)
    Online(Box<Facility>),
}

/// Since when the facility store has not answered this lane's claims. An
/// outage ends when claims are answered (or none wait), not when a
/// connection opens: a server that accepts connections but refuses claims
/// (full, read-only replica) must not be retried at once.
struct Outage {
    since: Instant,
    /// The same moment on the wall clock, for `outbox status`.
    since_ms: i64,
}

impl Outage {
    /// One beginning now.
    fn now() -> Outage {
        Outage {
            since: Instant::now(),
            since_ms: chrono::Utc::now().timestamp_millis(),
        }
    }
}

/// One claimer lane.
pub(super) struct Lane {
    kind: LaneKind,
    store: Store,
    gate: FacilityGate,
    link: Link,
    state: LinkState,
    outage: Option<Outage>,
    /// The facility store's retry schedule.
    retry: Backoff,
    /// The local database's own back-off (a full or failing disk): no
    /// round is sent while it runs, so a failing write is not retried —
    /// nor its claims re-sent to Redis — at full speed.
    db_retry: Backoff,
    db_retry_at: Instant,
    /// The round whose claims Redis is running.
    in_flight: Option<(Picked, Sent)>,
    /// The facility refused this gateway's window and retention: its own
    /// window is not the facility's rule, so it decides no echo by itself
    /// until a connection's check finds the settings agree again.
    settings_refused: bool,
    /// The last connect failed because the server refused this gateway's
    /// credentials or a grant (the ACL changed while it ran): an outage
    /// that needs a technician, so it begins with an ERROR, not a WARN.
    access_refused: bool,
    /// That refusal was logged (reset when a connect succeeds).
    access_reported: bool,
    /// When the live lane measures the facility's clock next.
    clock_due: Instant,
    /// Scans of this lane's last pass waited for facility time (logged
    /// once per change).
    clock_waiting: usize,
    /// When the live lane probes for a lost store and reads conflicts next.
    probe_due: Instant,
    /// When the live lane trims the facility ledger stream next.
    trim_due: Instant,
    /// The last trim found no consumer group (warned of once per change).
    no_group_warned: Option<bool>,
    /// A reconnect after a failure outside a claim round
    /// ([`Lane::connect_afresh`]) failed: the pass accounts it as a failed
    /// connect (an outage, the back-off).
    afresh_failed: bool,
    /// The writer is gone: one last round is sent, then the lane ends.
    stopping: bool,
    last_round_sent: bool,
    between: Arc<LaneNotes>,
    /// Its progress, for the watchdog (the thread counts each pass; a
    /// reconciliation counts each of its rounds too).
    progress: Progress,
    /// Rounds' verdicts go to the outbox writer's transactions
    /// ([`Lane::write`]); `None`: written on the lane's own connection.
    handoff: Option<Handoff>,
}

/// What one pass saw, for the steps after it and the wait.
#[derive(Default)]
struct Pass {
    /// The round picked by [`Lane::collect`] (`None`: the database failed).
    next: Option<Picked>,
    /// The round in flight, answered or failed ([`Lane::receive`]).
    answered: Option<(Picked, Result<Vec<Outcome>, String>)>,
    /// A round decided without claims ([`Lane::send`]).
    unclaimed: Option<(Picked, Result<Vec<Outcome>, String>)>,
    /// Why a claim, a settings check or a send failed this pass.
    failure: Option<String>,
    /// A connect attempt failed this pass.
    connect_failed: bool,
    /// Claims were answered this pass.
    answered_ok: bool,
    /// Nothing was open (and nothing held back): no sign against Redis.
    nothing_open: bool,
    /// More backlog waits behind the picked round.
    more: bool,
    /// Scans held back until the wall clock is synchronised.
    waiting_for_clock: usize,
    /// The local database failed this pass.
    db_failed: bool,
    /// The local database's back-off ran when the pass began.
    db_held: bool,
    /// A round's verdicts were written.
    recorded: bool,
    /// A decision may free scans the other lane holds back.
    wake_other: bool,
    /// A picked round was put back unsent because a claim failed this
    /// pass: its scans are still `pending`, and the kick that announced
    /// them may already be spent.
    put_back: bool,
}

/// Whether the lane goes on after a pass.
pub(super) enum Resume {
    /// Answers to read or more backlog: at once.
    Now,
    /// Wait for a kick, at most this long.
    Wait(Duration),
    /// Stopping, and the last round was made.
    End,
}

impl Lane {
    /// A lane of `kind` over its own `store` and `gate`; `first` is a
    /// connection made already (at start), else it connects when due.
    pub(super) fn new(
        kind: LaneKind,
        mut store: Store,
        mut gate: FacilityGate,
        link: Link,
        first: Option<Facility>,
        between: Arc<LaneNotes>,
        progress: Progress,
    ) -> Lane {
        gate.set_facility_time(link.redis.max_clock_error_ms as i64);
        gate.set_scanners(link.scanners());
        if kind == LaneKind::Replay {
            // (Left by an earlier run; this lane counts them afresh.)
            let _ = records::set_waiting_for_clock(&mut store, 0);
        }
        if let Some(clock) = first.as_ref().and_then(|f| f.clock()) {
            // The start-up connection's measurement (the live lane's; the
            // lanes' gates share what they learn).
            if let Err(e) = gate.learn_clock(&mut store, clock) {
                crate::events::RecordingFailed {
                    what: Recording::FirstClockSample,
                    error: &e,
                }
                .emit();
            }
        }
        let state = match first {
            Some(f) => LinkState::Online(Box::new(f)),
            None => LinkState::Offline {
                reason: "facility Redis not connected yet".into(),
                retry_at: Instant::now(),
            },
        };
        Lane {
            kind,
            store,
            gate,
            link,
            state,
            outage: None,
            retry: Backoff::new(BACKOFF_MIN, BACKOFF_MAX),
            db_retry: Backoff::new(BACKOFF_MIN, BACKOFF_MAX),
            db_retry_at: Instant::now(),
            in_flight: None,
            settings_refused: false,
            access_refused: false,
            access_reported: false,
            clock_due: Instant::now() + CLOCK_SAMPLE_EVERY,
            clock_waiting: 0,
            probe_due: Instant::now(),
            trim_due: Instant::now(),
            no_group_warned: None,
            afresh_failed: false,
            stopping: false,
            last_round_sent: false,
            between,
            progress,
            handoff: None,
        }
    }

    /// Hand the lane's rounds to the outbox writer ([`Lane::write`]).
    pub(super) fn with_handoff(mut self, handoff: Handoff) -> Lane {
        self.handoff = Some(handoff);
        self
    }

    /// Which lane.
    pub(super) fn kind(&self) -> LaneKind {
        self.kind
    }

    /// The lane's name in logs and thread names.
    pub(super) fn name(&self) -> &'static str {
        match self.kind {
            LaneKind::Live => "live",
            LaneKind::Replay => "replay",
        }
    }

    /// This lane's index in [`LaneNotes`]'s arrays, and the other's.
    fn me(&self) -> (usize, usize) {
        match self.kind {
            LaneKind::Live => (0, 1),
            LaneKind::Replay => (1, 0),
        }
    }

    /// How it reaches the facility store.
    pub(super) fn link(&self) -> &Link {
        &self.link
    }

    /// The gate's counters.
    pub(super) fn stats(&self) -> GateStats {
        self.gate.stats()
    }

    /// One pass of the six steps; `observe` sees every round's recorded
    /// decisions; `peers` wakes the other lane.
    pub(super) fn pass(&mut self, peers: &Peers, observe: &impl Fn(&[Decision])) -> Resume {
        let mut pass = Pass {
            connect_failed: !self.connect_if_due(),
            ..Pass::default()
        };
        self.sample_clock_if_due();
        self.probe_if_due();
        self.trim_if_due();
        pass.connect_failed |= std::mem::take(&mut self.afresh_failed);
        self.collect(&mut pass);
        self.receive(&mut pass);
        self.send(&mut pass);
        self.write(&mut pass, observe);
        if pass.wake_other {
            peers.wake_other(Wake::Scans);
        }
        self.account(&pass, peers);
        self.next(&pass)
    }

    /// Step 2: pick the next round, passing over the one in flight.
    fn collect(&mut self, pass: &mut Pass) {
        self.gate.set_local_echoes(!self.settings_refused);
        let skip: Vec<i64> = self
            .in_flight
            .as_ref()
            .map(|(p, _)| p.seqs().collect())
            .unwrap_or_default();
        let online = matches!(self.state, LinkState::Online(_));
        let (me, _) = self.me();
        self.between.held[me].store(true, Ordering::SeqCst);
        let now = CaptureTime::now();
        let next = pick(&self.store, &mut self.gate, self.kind, &skip, &now, online)
            .inspect_err(|e| {
                crate::events::LaneDbFailed {
                    lane: self.name(),
                    step: crate::events::LaneDbStep::Reading,
                    error: e,
                    retry_in: self.db_retry.peek(),
                }
                .emit()
            })
            .ok();
        pass.db_failed = next.is_none();
        pass.more = next.as_ref().is_some_and(Picked::more);
        // (Scans held back are open: a pick that held them all is no sign
        // that the facility store answers.)
        pass.nothing_open = next.as_ref().is_some_and(|p| p.is_empty() && p.held() == 0);
        // Read once per pass: the send and the wait must agree on whether
        // the local back-off still runs.
        pass.db_held = Instant::now() < self.db_retry_at;
        pass.waiting_for_clock = next.as_ref().map_or(0, Picked::waiting_for_clock);
        let held = next.as_ref().map_or(0, Picked::held);
        self.between.held[me].store(held > 0, Ordering::SeqCst);
        pass.next = next;
    }

    /// Step 3: the answers to the round in flight.
    fn receive(&mut self, pass: &mut Pass) {
        let Some((mut picked, sent)) = self.in_flight.take() else {
            return;
        };
        let claimed = match &mut self.state {
            LinkState::Online(f) => Ok(f.recv_claims(sent)),
            LinkState::Offline { reason, .. } => Err(reason.clone()),
        };
        let claimed = match claimed {
            Ok(Err(FacilityError::Lost { marker, .. })) => {
                self.claim_after_reconciling(&picked, &marker)
            }
            Ok(answered) => answered.map_err(|e| self.noted(e)),
            Err(reason) => Err(reason),
        };
        // (Whichever answered them, the facility's last answered round is
        // theirs.)
        if let (Ok(_), LinkState::Online(f)) = (&claimed, &self.state) {
            picked.answered_by(f);
        }
        if claimed.is_err() && self.settings_refused {
            // Picked before the refusal was known: its echoes were judged
            // by a window that is not the facility's. (Only on a failed
            // claim: answers match the scans claimed.)
            picked.withdraw_local_echoes();
        }
        pass.failure = claimed.as_ref().err().cloned();
        pass.answered_ok = claimed.is_ok();
        pass.answered = Some((picked, claimed));
    }

    /// Step 4: send the next round's claims, so Redis runs them while step
    /// 5 writes the answered round. After a failure it waits: picked again
    /// after the back-off, in capture order.
    fn send(&mut self, pass: &mut Pass) {
        let may_send =
            pass.failure.is_none() && !(self.stopping && self.last_round_sent) && !pass.db_held;
        pass.put_back = pass.failure.is_some() && pass.next.as_ref().is_some_and(|p| !p.is_empty());
        let Some(mut next) = pass.next.take().filter(|p| !p.is_empty() && may_send) else {
            return;
        };
        self.last_round_sent = self.stopping;
        if let Err(reason) = self.check_receipts(&mut next) {
            pass.failure = Some(reason.clone());
            pass.unclaimed = Some((next, Err(reason)));
            return;
        }
        let claims = next.claims(&self.gate);
        // A round of local verdicts alone sends no claim that would tell of
        // a facility-wide change of window: before this gateway's window
        // decides echoes, ask (one HMGET).
        let checked = match &mut self.state {
            LinkState::Online(f) if claims.is_empty() && next.has_local_echoes() => {
                f.check_settings()
            }
            _ => Ok(()),
        };
        if let Err(e) = checked {
            let reason = self.noted(e);
            if self.settings_refused {
                next.withdraw_local_echoes();
            }
            pass.failure = Some(reason.clone());
            pass.unclaimed = Some((next, Err(reason)));
            return;
        }
        if claims.is_empty() {
            pass.unclaimed = Some((next, Ok(Vec::new())));
            return;
        }
        let markers = markers(&self.store, self.gate.facility_now(), self.retention_ms());
        let between = self.between.clone();
        let _sending = reconciling(&between);
        match &mut self.state {
            LinkState::Online(f) => match f.send_claims_checked(&claims, &markers) {
                Ok(sent) => self.in_flight = Some((next, sent)),
                Err(e) => {
                    pass.failure = Some(e.to_string());
                    pass.unclaimed = Some((next, Err(e.to_string())));
                }
            },
            LinkState::Offline { reason, .. } => pass.unclaimed = Some((next, Err(reason.clone()))),
        }
    }

    /// Step 5: write the verdicts of the answered round and of a round
    /// decided without claims.
    fn write(&mut self, pass: &mut Pass, observe: &impl Fn(&[Decision])) {
        let (_, other) = self.me();
        for (picked, claimed) in pass
            .answered
            .take()
            .into_iter()
            .chain(pass.unclaimed.take())
        {
            let recorded = match &self.handoff {
                // In the outbox writer's next transaction, beside its
                // admits (one fsync for both), waited for; on the lane's
                // own connection once the writer has ended (at a stop).
                Some(handoff) if !picked.is_empty() => {
                    let mut copy = self.gate.copy();
                    handoff
                        .write(&mut self.store, move |tx| {
                            record_in(tx, &mut copy, picked, claimed)
                        })
                        .map(|recorded| self.gate.settle_round(recorded))
                }
                _ => record(&mut self.store, &mut self.gate, picked, claimed),
            };
            match recorded {
                Ok(round) => {
                    pass.recorded = true;
                    observe(&round.decisions);
                    if round.decisions.is_empty() {
                        continue;
                    }
                    // A decided scan may free scans the other lane holds
                    // back; new unresolved scans are the replay's.
                    pass.wake_other |= self.between.held[other].load(Ordering::SeqCst)
                        || (self.kind == LaneKind::Live
                            && round
                                .decisions
                                .iter()
                                .any(|d| matches!(d.verdict, Verdict::Unresolved { .. })));
                }
                Err(e) => {
                    // The rows stay open; their claims are idempotent.
                    crate::events::LaneDbFailed {
                        lane: self.name(),
                        step: crate::events::LaneDbStep::Writing,
                        error: &e,
                        retry_in: self.db_retry.peek(),
                    }
                    .emit();
                    pass.db_failed = true;
                }
            }
        }
    }

    /// Step 6: a failed claim or connect attempt begins (or continues) an
    /// outage and backs the retry off; answered claims end it.
    fn account(&mut self, pass: &Pass, peers: &Peers) {
        let failed = match (&pass.failure, &self.state) {
            (Some(reason), _) => Some(reason.clone()),
            (None, LinkState::Offline { reason, .. }) if pass.connect_failed => {
                Some(reason.clone())
            }
            (None, _) => None,
        };
        let recovered =
            matches!(self.state, LinkState::Online(_)) && (pass.answered_ok || pass.nothing_open);
        let shown = &self.link.shown;
        if let Some(reason) = failed {
            // Refused credentials or a grant (the ACL changed while this
            // gateway ran): an ERROR, once per connection lost, also when
            // the outage began as a plain disconnect.
            let refused_anew = self.access_refused && !self.access_reported;
            self.access_reported |= self.access_refused;
            match &self.outage {
                _ if refused_anew => {
                    crate::events::FacilityRefuses {
                        redis: shown,
                        lane: self.name(),
                        reason: &reason,
                    }
                    .emit();
                    self.outage.get_or_insert_with(Outage::now);
                }
                None => {
                    crate::events::FacilityUnavailable {
                        redis: shown,
                        lane: self.name(),
                        reason: &reason,
                        outage: crate::events::Outage::Begins,
                    }
                    .emit();
                    self.outage = Some(Outage::now());
                }
                // (The replay lane retries on a timer and says so; the
                // live lane only on new scans, which wait with the rest.)
                Some(_) => crate::events::FacilityUnavailable {
                    redis: shown,
                    lane: self.name(),
                    reason: &reason,
                    outage: match self.kind {
                        LaneKind::Replay => crate::events::Outage::Backlog {
                            waiting: backlog(&self.store),
                            next: self.retry.peek(),
                        },
                        LaneKind::Live => crate::events::Outage::Continues,
                    },
                }
                .emit(),
            }
            let since_ms = self.outage.as_ref().map_or(0, |o| o.since_ms);
            publish(
                &mut self.store,
                &self.between.shown,
                false,
                Some(&reason),
                since_ms,
            );
            // Reconnect after the back-off.
            self.state = LinkState::Offline {
                reason,
                retry_at: Instant::now() + self.retry.failed(),
            };
        } else if recovered {
            if let Some(outage) = self.outage.take() {
                peers.wake_other(Wake::Answering);
                let doing = match self.kind {
                    LaneKind::Live => "new scans are claimed as they come",
                    LaneKind::Replay => "unresolved scans are being replayed",
                };
                crate::events::FacilityAnswers {
                    redis: shown,
                    lane: self.name(),
                    outage: outage.since.elapsed(),
                    doing,
                }
                .emit();
            }
            self.retry.reset();
            let now_ms = chrono::Utc::now().timestamp_millis();
            publish(&mut self.store, &self.between.shown, true, None, now_ms);
        }
        self.log_clock_waiting(pass);
        if pass.db_failed {
            self.db_retry_at = Instant::now() + self.db_retry.failed();
        } else if pass.recorded {
            self.db_retry.reset();
        }
    }

    /// Say when scans begin to wait for facility time, and when none do
    /// any more (the replay lane's backlog; the live lane's new scans
    /// become unresolved and move there).
    fn log_clock_waiting(&mut self, pass: &Pass) {
        let (was, now) = (self.clock_waiting, pass.waiting_for_clock);
        if pass.db_failed {
            return; // nothing was picked: nothing known
        }
        self.clock_waiting = now;
        if self.kind == LaneKind::Replay
            && was != now
            && let Err(e) = records::set_waiting_for_clock(&mut self.store, now)
        {
            crate::events::RecordingFailed {
                what: Recording::WaitingForClock,
                error: &e,
            }
            .emit();
        }
        if self.kind == LaneKind::Replay && (was == 0) != (now == 0) {
            crate::events::ClockWaiting {
                redis: &self.link.shown,
                lane: self.name(),
                waiting: now,
                max_clock_error_ms: self.link.redis.max_clock_error_ms,
            }
            .emit();
        }
    }

    /// After a pass: go on at once (answers to read, more backlog — a stop
    /// is still heard: a replay of an hour's backlog must not outlast the
    /// stop timeout), end (stopping, the last round made), or wait.
    fn next(&self, pass: &Pass) -> Resume {
        // While the local back-off runs, more backlog is no reason to go
        // again: the round would only be picked and held back once more.
        let db_wait = pass.db_failed || pass.db_held;
        if self.in_flight.is_some() || (pass.more && !db_wait && !self.stopping) {
            return Resume::Now;
        }
        if self.stopping {
            // Shutdown: one last attempt was made; what is left stays durable.
            return Resume::End;
        }
        // A round put back after a failed claim goes again now, offline:
        // the live lane audits its scans unresolved (for the replay lane)
        // instead of leaving them pending until the next scan's kick.
        if pass.put_back && self.kind == LaneKind::Live && !db_wait {
            return Resume::Now;
        }
        // Offline, the live lane waits for new scans (each kick after the
        // back-off tries a connection); the replay lane retries while a
        // backlog waits. Otherwise: until kicked.
        let mut wait = match &self.state {
            LinkState::Offline { retry_at, .. }
                if self.kind == LaneKind::Replay && has_backlog(&self.store) =>
            {
                retry_at.saturating_duration_since(Instant::now())
            }
            _ => Duration::from_secs(3600),
        };
        // Refused local writes are retried when their back-off ends, also
        // when a kick woke this lane in the meantime (0 if it just ended).
        if db_wait {
            wait = wait.min(self.db_retry_at.saturating_duration_since(Instant::now()));
        }
        if pass.waiting_for_clock > 0 {
            wait = wait.min(CLOCK_POLL); // look again soon: NTP may have synced
        }
        if self.kind == LaneKind::Live && matches!(self.state, LinkState::Online(_)) {
            let due = self.clock_due.min(self.probe_due).min(self.trim_due);
            wait = wait.min(due.saturating_duration_since(Instant::now()));
        }
        Resume::Wait(wait)
    }

    /// What woke the lane: the other lane's claims are answered again
    /// (retry now, not when this lane's back-off ends), or the writer is
    /// gone (one last attempt, then end).
    pub(super) fn woken(&mut self, wake: &Wake) {
        let retry_now = match wake {
            Wake::Scans => false,
            Wake::Answering => {
                self.retry.reset();
                true
            }
            Wake::Stop => {
                self.stopping = true;
                true
            }
        };
        if let (true, LinkState::Offline { retry_at, .. }) = (retry_now, &mut self.state) {
            *retry_at = Instant::now();
        }
    }

    /// The failure as the reason logged and audited; a refusal of this
    /// gateway's settings also marks them refused.
    fn noted(&mut self, e: FacilityError) -> String {
        if matches!(e, FacilityError::SettingsDiffer { .. }) {
            self.settings_refused = true;
        }
        self.access_refused = matches!(
            e,
            FacilityError::AuthRefused { .. } | FacilityError::NoPermission { .. }
        );
        e.to_string()
    }
}

/// Whether `unresolved` scans wait in the outbox (an index probe; `true` if
/// the database cannot say, so the lane keeps trying).
fn has_backlog(store: &Store) -> bool {
    crate::outbox::open::has_unresolved(&store.conn).unwrap_or(true)
}

/// Pick `lane`'s next round ([`FacilityGate::pick`]) in one read snapshot of
/// `store`, passing over `skip` (its round still in flight).
pub fn pick(
    store: &Store,
    gate: &mut FacilityGate,
    lane: LaneKind,
    skip: &[i64],
    now: &CaptureTime,
    online: bool,
) -> Result<Picked, StoreError> {
    let snapshot = store.read()?;
    gate.pick(&snapshot, lane, skip, now, online)
        .map_err(|e| store.err_at(e))
}

/// Write a picked round's verdicts ([`FacilityGate::record`]) in one transaction,
/// with the round's last commit as its lane's marker
/// (`reconcile::note_commit`), then settle them.
pub fn record(
    store: &mut Store,
    gate: &mut FacilityGate,
    picked: Picked,
    claimed: Result<Vec<Outcome>, String>,
) -> Result<Round, StoreError> {
    if picked.is_empty() {
        return Ok(Round::default());
    }
    let w = store.write()?;
    let recorded = record_in(&w, gate, picked, claimed).map_err(|e| w.err(e))?;
    w.commit()?;
    Ok(gate.settle_round(recorded))
}

/// A round's verdicts and its lane's marker, written in `tx`.
fn record_in(
    tx: &Connection,
    gate: &mut FacilityGate,
    picked: Picked,
    claimed: Result<Vec<Outcome>, String>,
) -> rusqlite::Result<Recorded> {
    let lane = picked.lane();
    let last = claimed
        .as_ref()
        .ok()
        .and_then(|outcomes| picked.last_committed(outcomes))
        .map(str::to_owned);
    let recorded = gate.record(tx, picked, claimed)?;
    if let Some(uuid) = last {
        reconcile::note_commit(tx, lane, &uuid, gate.facility_now())?;
    }
    Ok(recorded)
}

/// One round of each lane, start to end, without overlap — the replay's,
/// then the live lane's: [`pick`], the claim through `redis` (`None`
/// while no connection is up: then only local verdicts are made and new
/// scans become unresolved with `offline_reason`), [`record`]. The lanes'
/// threads run the same steps concurrently; this runs them in one
/// deterministic order (tests, tools).
pub fn round(
    store: &mut Store,
    gate: &mut FacilityGate,
    mut redis: Option<&mut Facility>,
    offline_reason: &str,
    now: &CaptureTime,
) -> Result<Round, StoreError> {
    let mut round = Round::default();
    for lane in [LaneKind::Replay, LaneKind::Live] {
        let mut picked = pick(store, gate, lane, &[], now, redis.is_some())?;
        let checked = match redis.as_deref_mut() {
            Some(f) => picked.check_receipts(gate, f).map_err(|e| e.to_string()),
            None => Ok(()),
        };
        let claims = picked.claims(gate);
        let claimed = match (redis.as_deref_mut(), checked) {
            (_, Err(e)) => Err(e),
            _ if claims.is_empty() => Ok(Vec::new()),
            (Some(f), Ok(())) => {
                let claimed = f.claim_batch(&claims).map_err(|e| e.to_string());
                picked.answered_by(f);
                claimed
            }
            (None, Ok(())) => Err(offline_reason.to_string()),
        };
        round = round.and(record(store, gate, picked, claimed)?);
    }
    Ok(round)
}

/// The lock no claim is sent without while a lane reconciles.
fn reconciling(between: &LaneNotes) -> MutexGuard<'_, ()> {
    between
        .reconciling
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}
