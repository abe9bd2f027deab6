//! The gate as a claimer lane uses it: this gateway's local verdict
//! ([`Gate`]: Bloom filter, exact window), the facility clock its captures
//! are compared on ([`FacilityClock`]), and what the lane settles for
//! itself — whether its own echo window may decide, the live lane's rows
//! in memory. Which scans to claim and how a round is written are in
//! [`super::claims`].

use super::facility_time::FacilityClock;
use super::link::ScannerList;
use crate::capture::CaptureTime;
use crate::events::Event as _;
use crate::gate::Gate;
use crate::model::{ClockSample, EchoWindow, GateStats};
use crate::outbox::admitted::Cached;
use crate::store::{Store, StoreError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// A claimer lane's gate: the local gate, facility time, and the lane's
/// own settings. Two lanes' gates ([`FacilityGate::lane`]) share the local
/// gate's knowledge and the facility clock.
pub struct FacilityGate {
    /// The local verdict, and the writer of every verdict.
    pub(super) gate: Gate,
    /// The facility clock's samples, per boot: shared by both lanes.
    clock: Arc<Mutex<FacilityClock>>,
    /// Captures are compared on facility time, mapped within this many ms
    /// (see [`FacilityGate::set_facility_time`]).
    pub(super) max_clock_error_ms: Option<i64>,
    /// Whether this gateway's own echo window may decide a round (see
    /// [`FacilityGate::set_local_echoes`]).
    pub(super) local_echoes: bool,
    /// The live lane: the rows the writer made durable, in memory
    /// ([`FacilityGate::with_admitted`]).
    pub(super) admitted: Option<Cached>,
    /// This gateway's scanners, and which are `shared`
    /// ([`FacilityGate::set_scanners`]).
    scanners: ScannerList,
}

impl FacilityGate {
    /// `gate` as a claimer lane's, with the facility clock's samples
    /// recorded in `store` (a backlog read before a restart is mapped
    /// after it).
    pub fn new(gate: Gate, store: &Store) -> Result<FacilityGate, StoreError> {
        let clock = FacilityClock::load(&store.conn).map_err(|e| store.err_at(e))?;
        Ok(FacilityGate {
            gate,
            clock: Arc::new(Mutex::new(clock)),
            max_clock_error_ms: None,
            local_echoes: true,
            admitted: None,
            scanners: ScannerList::default(),
        })
    }

    /// A second lane's gate over the same knowledge and facility clock,
    /// with settings as this one's and counters of its own
    /// ([`Gate::lane`]). What either records, the other sees at once.
    pub fn lane(&self) -> FacilityGate {
        FacilityGate {
            gate: self.gate.lane(),
            clock: Arc::clone(&self.clock),
            max_clock_error_ms: self.max_clock_error_ms,
            local_echoes: self.local_echoes,
            admitted: None,
            scanners: Arc::clone(&self.scanners),
        }
    }

    /// A copy of this gate, settings and counters ([`Gate::copy`]): it
    /// records a round in a transaction run on another thread (the outbox
    /// writer's, `store::handoff`), and this gate settles it once that
    /// transaction has committed.
    pub fn copy(&self) -> FacilityGate {
        FacilityGate {
            gate: self.gate.copy(),
            ..self.lane()
        }
    }

    /// This gate, its `pending` rows' columns taken from `cached` where it
    /// has them instead of read from the table (the live lane:
    /// [`crate::outbox::admitted`]); which rows, and their order, are
    /// still the table's.
    pub fn with_admitted(mut self, cached: Cached) -> FacilityGate {
        self.admitted = Some(cached);
        self
    }

    /// Compare captures on facility time — each capture's boot stamp mapped
    /// through the facility clock's samples of its boot
    /// ([`super::facility_time`]) — and claim a scan only once it maps
    /// within `max_error_ms` (see [`FacilityGate::pick`]). A scan's own
    /// echo window is then never narrower than two captures of one read
    /// by two gateways can differ on facility time (twice the bound), so
    /// a shared scanner's read heard by both is still one pick.
    pub fn set_facility_time(&mut self, max_error_ms: i64) {
        self.max_clock_error_ms = Some(max_error_ms);
        self.gate
            .set_window_floor(EchoWindow::from_ms(2 * max_error_ms));
    }

    /// The facility's time now (Unix ms): this boot's clock mapped through
    /// the measurements, else (none yet) the wall clock. The horizon of
    /// what the facility still knows (decision keys expire on its clock)
    /// is measured on it, like the captures in the ledger.
    pub fn facility_now(&self) -> i64 {
        let now = CaptureTime::now();
        self.clock().map(&now).map_or(now.utc_ms, |m| m.facility_ms)
    }

    /// Keep a measurement of the facility clock: recorded in `store` (so it
    /// maps captures after a restart too) and known at once to every lane
    /// of this gate. Samples older than the retention are dropped.
    pub fn learn_clock(&self, store: &mut Store, sample: &ClockSample) -> Result<(), StoreError> {
        let (window, retention) = self.gate.horizon();
        let keep_ms = retention.as_millis() as i64;
        let w = store.write()?;
        FacilityClock::store(&w.tx, sample, keep_ms).map_err(|e| w.err(e))?;
        w.commit()?;
        let step = self.clock().learn(sample, keep_ms);
        if let Some(step_ms) = step {
            crate::events::FacilityClockStepped {
                step_ms,
                window_ms: window.ms(),
            }
            .emit();
        }
        Ok(())
    }

    /// Whether echoes of this gateway's own commits are suppressed locally
    /// (on by default). Off while the facility refuses this gateway's
    /// window and retention (they are no longer the facility's rule): such
    /// scans are then claimed like any other, so they wait `unresolved`
    /// until the settings agree. Rejections are still made locally: they
    /// do not depend on the window.
    pub fn set_local_echoes(&mut self, on: bool) {
        self.local_echoes = on;
    }

    /// Know which of this gateway's scanners are `shared` from `scanners`
    /// (the link's list, which a reload changes). A shared scanner's echo
    /// is never decided by this gateway's own window: its nearest commit
    /// may be another gateway's, which only the facility knows, and every
    /// gateway that heard the read must name the same one.
    pub(super) fn set_scanners(&mut self, scanners: ScannerList) {
        self.scanners = scanners;
    }

    /// The names of this gateway's `shared` scanners, now.
    pub(super) fn shared_scanners(&self) -> Vec<String> {
        let list = self.scanners.lock().unwrap_or_else(PoisonError::into_inner);
        list.iter()
            .filter(|(_, shared)| *shared)
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The local gate.
    pub fn local(&self) -> &Gate {
        &self.gate
    }

    /// The local gate, this lane's settings dropped.
    pub fn into_local(self) -> Gate {
        self.gate
    }

    /// The local gate, to change its settings.
    pub fn local_mut(&mut self) -> &mut Gate {
        &mut self.gate
    }

    /// Counters since start.
    pub fn stats(&self) -> GateStats {
        self.gate.stats()
    }

    /// This gateway's id (the ledger's `gateway` field).
    pub fn gateway(&self) -> &str {
        self.gate.gateway()
    }

    /// The facility clock, locked (a few memory operations per use).
    pub(super) fn clock(&self) -> MutexGuard<'_, FacilityClock> {
        self.clock.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
