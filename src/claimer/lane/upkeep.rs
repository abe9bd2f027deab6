//! A lane's upkeep besides its claim rounds: connecting when due, the
//! facility clock sampled, the probe for a lost commit (and the
//! reconciliation it starts), the ledger stream trimmed, other gateways'
//! conflict notices read.

use super::super::claims::{LaneKind, Picked};
use super::super::reconcile::{self, markers};
use super::super::records;
use super::{
    CLOCK_SAMPLE_EVERY, Lane, LinkState, PROBE_EVERY, TRIM_EVERY, has_backlog, reconciling,
};
use crate::events::{Event as _, LostCommitProbeFailed, Reconcile, Recording};
use crate::facility::Outcome;
use std::time::Instant;

impl Lane {
    /// Step 1: connect if offline, no round is in flight and the retry is
    /// due — the replay lane only for a backlog (an idle gateway does not
    /// poll a Redis that is down twice). False if the attempt failed.
    pub(super) fn connect_if_due(&mut self) -> bool {
        let due = match &self.state {
            LinkState::Offline { retry_at, .. } => Instant::now() >= *retry_at,
            LinkState::Online(_) => false,
        };
        if !due
            || self.in_flight.is_some()
            || (self.kind == LaneKind::Replay && !has_backlog(&self.store))
        {
            return true;
        }
        match self.link.connect_for(self.name()) {
            Ok(f) => {
                if let Err(e) = records::set_scanner_clones(&mut self.store, f.clones()) {
                    crate::events::RecordingFailed {
                        what: Recording::ScannerClones,
                        error: &e,
                    }
                    .emit();
                }
                if let Some(clock) = f.clock().cloned() {
                    self.record_clock(&clock);
                }
                self.state = LinkState::Online(Box::new(f));
                self.settings_refused = false;
                self.access_refused = false;
                self.access_reported = false;
                true
            }
            Err(e) => {
                let reason = self.noted(e);
                if let LinkState::Offline { reason: r, .. } = &mut self.state {
                    *r = reason;
                }
                false
            }
        }
    }

    /// Between steps 1 and 2, while connected and nothing is in flight,
    /// every [`CLOCK_SAMPLE_EVERY`]: re-read the replicas that confirm
    /// claims (both lanes: each has its own connection) and, the live lane,
    /// measure the facility's clock.
    pub(super) fn sample_clock_if_due(&mut self) {
        let lane = self.name();
        let LinkState::Online(f) = &mut self.state else {
            return;
        };
        if self.in_flight.is_some() || Instant::now() < self.clock_due {
            return;
        }
        self.clock_due = Instant::now() + CLOCK_SAMPLE_EVERY;
        // (Replicas attached or gone since the connect: "auto" follows.)
        self.link.refresh_confirmation(f, lane);
        if self.kind != LaneKind::Live {
            return;
        }
        if let Some(clock) = self.link.sample_clock(f) {
            self.record_clock(&clock);
        }
    }

    /// After [`Lane::sample_clock_if_due`], the live lane, while connected
    /// and nothing is in flight: every [`PROBE_EVERY`] (and at its first
    /// pass), check that the facility store still has this gateway's marker
    /// (reconcile if not: an idle gateway notices a lost store too), and
    /// audit the conflicts other gateways' reconciliations found with this
    /// gateway's commits.
    pub(super) fn probe_if_due(&mut self) {
        if self.kind != LaneKind::Live
            || self.in_flight.is_some()
            || Instant::now() < self.probe_due
            || !matches!(self.state, LinkState::Online(_))
        {
            return;
        }
        self.probe_due = Instant::now() + PROBE_EVERY;
        let pending = reconcile::pending(&self.store);
        let mine = markers(&self.store, self.gate.facility_now(), self.retention_ms());
        let LinkState::Online(f) = &mut self.state else {
            return;
        };
        let mut lost = None;
        for m in mine {
            match f.has_decision(&m) {
                Ok(true) => {}
                Ok(false) => {
                    lost = Some(m);
                    break;
                }
                Err(e) => {
                    LostCommitProbeFailed {
                        redis: &self.link.shown,
                        error: &e,
                    }
                    .emit();
                    self.connect_afresh(&e.to_string());
                    return;
                }
            }
        }
        // A reconciliation cut short after its marker was back (its
        // conflicts not yet recorded or published) is finished first.
        if let Some(m) = pending.or(lost) {
            // (A failure is logged; the next claim or probe tries again.)
            if let Err(reason) = self.reconcile(&m) {
                self.connect_afresh(&reason);
                return;
            }
        }
        self.read_notices();
    }

    /// After [`Lane::probe_if_due`], the live lane, while connected and
    /// nothing is in flight: every [`TRIM_EVERY`] (and at its first pass),
    /// trim the facility ledger stream to what every consumer group has
    /// acknowledged and is older than `[redis] ledger_stream_keep_days`
    /// (one atomic script: several gateways may do it at once), and record
    /// what it found for `status`. WARNs while no group reads the stream:
    /// then nothing is trimmed and the facility Redis's memory grows.
    pub(super) fn trim_if_due(&mut self) {
        if self.kind != LaneKind::Live || self.in_flight.is_some() || Instant::now() < self.trim_due
        {
            return;
        }
        let LinkState::Online(f) = &mut self.state else {
            return;
        };
        self.trim_due = Instant::now() + TRIM_EVERY;
        let shown = &self.link.shown;
        let stream = match f.trim_ledger(self.link.redis.ledger_keep_ms()) {
            Ok(s) => s,
            Err(e) => {
                crate::events::LedgerTrim::Failed {
                    redis: shown,
                    stream: &f.ledger_key(),
                    error: &e,
                    every: TRIM_EVERY,
                }
                .emit();
                self.connect_afresh(&e.to_string());
                return;
            }
        };
        let none = stream.groups.is_empty();
        if self.no_group_warned != Some(none) {
            if none {
                crate::events::LedgerTrim::NoGroup {
                    redis: shown,
                    stream: &f.ledger_key(),
                    entries: stream.length,
                }
                .emit();
            } else if self.no_group_warned.is_some() {
                crate::events::LedgerTrim::GroupReads {
                    redis: shown,
                    groups: stream.groups.len(),
                }
                .emit();
            }
            self.no_group_warned = Some(none);
        }
        if stream.trimmed > 0 {
            crate::events::LedgerTrim::Trimmed {
                redis: shown,
                trimmed: stream.trimmed,
                entries: stream.length,
            }
            .emit();
        }
        if let Err(e) = records::set_ledger_stream(&mut self.store, &stream) {
            crate::events::RecordingFailed {
                what: Recording::LedgerStream,
                error: &e,
            }
            .emit();
        }
    }

    /// Audit the conflicts other gateways' reconciliations published that
    /// name this gateway's commits.
    pub(super) fn read_notices(&mut self) {
        let LinkState::Online(f) = &mut self.state else {
            return;
        };
        match reconcile::read_notices(f, &mut self.store, self.gate.gateway()) {
            Ok(0) => {}
            Ok(n) => Reconcile::ConflictsNoticed {
                redis: &self.link.shown,
                conflicts: n,
            }
            .emit(),
            Err(e) => {
                Reconcile::NoticesUnreadable {
                    redis: &self.link.shown,
                    error: &e,
                    every: PROBE_EVERY,
                }
                .emit();
                self.connect_afresh(&e.to_string());
            }
        }
    }

    /// After a failure outside a claim round (the probe, a reconciliation
    /// it began, the trim, the conflicts stream), connect again at once: the
    /// connection may still owe replies to what failed (a reconciliation's
    /// pipelined calls), which a later command would read as its own. (A
    /// failed claim round drops the connection through [`Lane::account`].)
    /// Offline, as after any failed connect, if that fails.
    pub(super) fn connect_afresh(&mut self, reason: &str) {
        self.state = LinkState::Offline {
            reason: reason.to_string(),
            retry_at: Instant::now(),
        };
        self.afresh_failed = !self.connect_if_due();
    }

    /// The retention horizon in ms.
    pub(super) fn retention_ms(&self) -> i64 {
        self.link.retention.as_millis() as i64
    }

    /// The facility store lacks this gateway's commit `lost`: re-publish
    /// this gateway's commits of the retention horizon, holding the lock so
    /// the other lane claims nothing meanwhile; logs the figures (once per
    /// reconciliation) or the failure.
    pub(super) fn reconcile(&mut self, lost: &str) -> Result<(), String> {
        let retention_ms = self.retention_ms();
        let between = self.between.clone();
        let _only = reconciling(&between);
        let lane = self.name();
        let LinkState::Online(f) = &mut self.state else {
            return Err("facility Redis not connected".into());
        };
        let shown = &self.link.shown;
        Reconcile::Begins {
            redis: shown,
            lane,
            lost,
            hours: retention_ms / 3_600_000,
        }
        .emit();
        let now_ms = self.gate.facility_now();
        match reconcile::reconcile(
            f,
            &mut self.store,
            &self.gate,
            now_ms,
            retention_ms,
            lost,
            &self.progress,
        ) {
            Ok(Some(r)) => {
                Reconcile::Done {
                    redis: shown,
                    lane,
                    done: &r,
                }
                .emit();
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => {
                Reconcile::Failed {
                    redis: shown,
                    lane,
                    error: &e,
                }
                .emit();
                Err(format!("reconciling with the facility store failed: {e}"))
            }
        }
    }

    /// A round's `receive` reads of serialised items: the facility's first
    /// receipt of each, before their claims are built
    /// ([`Picked::check_receipts`]); offline, nothing (they wait).
    pub(super) fn check_receipts(&mut self, next: &mut Picked) -> Result<(), String> {
        match &mut self.state {
            LinkState::Online(f) => next
                .check_receipts(&self.gate, f)
                .map_err(|e| self.noted(e)),
            LinkState::Offline { .. } => Ok(()),
        }
    }

    /// Claim `picked` again after a reconciliation its claim's refusal
    /// ([`crate::facility::FacilityError::Lost`]) called for.
    pub(super) fn claim_after_reconciling(
        &mut self,
        picked: &Picked,
        lost: &str,
    ) -> Result<Vec<Outcome>, String> {
        self.reconcile(lost)?;
        let claims = picked.claims(&self.gate);
        let markers = markers(&self.store, self.gate.facility_now(), self.retention_ms());
        let claimed = match &mut self.state {
            LinkState::Online(f) => f.claim_batch_checked(&claims, &markers),
            LinkState::Offline { reason, .. } => return Err(reason.clone()),
        };
        claimed.map_err(|e| self.noted(e))
    }

    /// Keep a clock sample: captures are mapped through it (both lanes),
    /// and `outbox status` shows it.
    pub(super) fn record_clock(&mut self, clock: &crate::model::ClockSample) {
        if let Err(e) = self.gate.learn_clock(&mut self.store, clock) {
            crate::events::RecordingFailed {
                what: Recording::ClockSample,
                error: &e,
            }
            .emit();
        }
        if let Err(e) = records::set_clock(&mut self.store, clock) {
            crate::events::RecordingFailed {
                what: Recording::FacilityClock,
                error: &e,
            }
            .emit();
        }
    }
}
