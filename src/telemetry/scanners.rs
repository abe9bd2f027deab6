//! The scanners' series, one of each per configured scanner: reads,
//! decisions, ambiguous echoes, feedback, up, last read; and the live
//! status they feed (`scangate status`: devices open, reads today). A
//! scanner a reload removes has its series forgotten.

use super::live::LiveScanner;
use super::{FloatGauge, Telemetry, now_ms};
use crate::model::{Alert, Decision, ScanState};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

/// An ambiguous echo decided this soon after its read (ns) counts towards
/// a burst in `status`.
const AMBIGUOUS_LIVE_NS: i64 = 60_000_000_000;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ScannerLabel {
    scanner: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    scanner: String,
    decision: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AlertLabels {
    scanner: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InfoLabels {
    scanner: String,
    model: String,
    firmware: String,
    serial: String,
}

impl InfoLabels {
    /// Scanner `s`'s series, if it said anything of what it is (an empty
    /// label for what it did not say): the firmware its own protocol
    /// reported, else its USB device's release.
    fn of(s: &LiveScanner) -> Option<InfoLabels> {
        let id = s.identity.as_ref();
        if id.is_none() && s.software.is_none() {
            return None;
        }
        Some(InfoLabels {
            scanner: s.name.clone(),
            model: id.map(crate::model::Identity::model).unwrap_or_default(),
            firmware: s
                .software
                .clone()
                .or_else(|| id.and_then(|i| i.release.clone()))
                .unwrap_or_default(),
            serial: id.and_then(|i| i.serial.clone()).unwrap_or_default(),
        })
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FeedbackLabels {
    scanner: String,
    told: &'static str,
    outcome: &'static str,
}

fn label(name: &str) -> ScannerLabel {
    ScannerLabel {
        scanner: name.to_string(),
    }
}

/// The scanners' series and live status.
pub(super) struct ScannerMetrics {
    scans_read: Family<ScannerLabel, Counter>,
    decisions: Family<DecisionLabels, Counter>,
    ambiguous: Family<ScannerLabel, Counter>,
    feedback: Family<FeedbackLabels, Counter>,
    alerts: Family<AlertLabels, Counter>,
    unacknowledged: Family<ScannerLabel, Gauge>,
    info: Family<InfoLabels, Gauge>,
    up: Family<ScannerLabel, Gauge>,
    last_read: Family<ScannerLabel, FloatGauge>,
    /// What `scangate status` shows of each scanner, by name.
    live: Mutex<BTreeMap<String, LiveScanner>>,
    /// What each scanner was when the daemon last ran (its status file),
    /// until its first connect of this run.
    last_run: Mutex<BTreeMap<String, crate::model::Identity>>,
}

impl ScannerMetrics {
    /// Registered in `registry`, each of `configured` at zero.
    pub(super) fn register(registry: &mut Registry, configured: &[String]) -> ScannerMetrics {
        let m = ScannerMetrics {
            scans_read: Family::default(),
            decisions: Family::default(),
            ambiguous: Family::default(),
            feedback: Family::default(),
            alerts: Family::default(),
            unacknowledged: Family::default(),
            info: Family::default(),
            up: Family::default(),
            last_read: Family::default(),
            live: Mutex::default(),
            last_run: Mutex::default(),
        };
        registry.register(
            "scangate_scans_read",
            "Scans read per scanner since start (each is made durable, then ACKed)",
            m.scans_read.clone(),
        );
        registry.register(
            "scangate_decisions",
            "Decisions since start per scanner: committed, suppressed, rejected, or unresolved (a scan left waiting for the facility store, counted once however often it is retried)",
            m.decisions.clone(),
        );
        registry.register(
            "scangate_ambiguous_echoes",
            "Echoes per scanner since start of a label without a serial (counted in the suppressed decisions too): another identical item, a re-scan and a double-fire read alike, so each may be an under-count. A burst on one scanner: someone may be counting identical items",
            m.ambiguous.clone(),
        );
        registry.register(
            "scangate_feedback",
            "Signals to scanners and the gateway LED since start, per scanner, what was told and the outcome: sent; skipped (the decision came later than the scanner's feedback max_delay_ms after the read); or failed (the device refused the write)",
            m.feedback.clone(),
        );
        registry.register(
            "scangate_alerts",
            "Alerts the checks at the counter raised since start, per scanner and kind (recalled, suspect, expired, unknown, expiring): reads recorded (or left waiting) whose item the scanner was told about instead of \"committed\"",
            m.alerts.clone(),
        );
        registry.register(
            "scangate_alerts_unacknowledged",
            "Alerts per scanner that staff have not acknowledged yet with the ACKNOWLEDGE control label (kept across restarts)",
            m.unacknowledged.clone(),
        );
        registry.register(
            "scangate_scanner_info",
            "What each scanner says it is, from its USB device descriptors (always 1): model (manufacturer and product strings, else vendor:product IDs), firmware (the device release), serial number; the device open now or last (none for a scanner not on USB)",
            m.info.clone(),
        );
        registry.register(
            "scangate_scanner_up",
            "1 while the scanner's device is open",
            m.up.clone(),
        );
        registry.register(
            "scangate_scanner_last_read_timestamp_seconds",
            "Unix time of the scanner's last read since start (0: none yet)",
            m.last_read.clone(),
        );
        m.set(configured);
        m
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, LiveScanner>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The configured scanners are `names`: a new one starts
    /// disconnected with zero reads, a removed one's series are gone.
    fn set(&self, names: &[String]) {
        let mut live = self.lock();
        let gone: Vec<String> = live
            .keys()
            .filter(|n| !names.contains(n))
            .cloned()
            .collect();
        for name in gone {
            if let Some(info) = live.get(&name).and_then(InfoLabels::of) {
                self.info.remove(&info);
            }
            self.forget(&name);
            live.remove(&name);
        }
        for name in names {
            if !live.contains_key(name) {
                self.zero(name);
                live.insert(name.clone(), LiveScanner::new(name));
            }
        }
    }

    /// A scanner's series, at zero (configured, never read).
    fn zero(&self, name: &str) {
        let label = label(name);
        self.scans_read.get_or_create(&label).inc_by(0);
        self.up.get_or_create(&label).set(0);
        self.last_read.get_or_create(&label).set(0.0);
        for decision in ScanState::ALL.iter().filter(|s| **s != ScanState::Pending) {
            self.decisions
                .get_or_create(&DecisionLabels {
                    scanner: name.to_string(),
                    decision: decision.as_str(),
                })
                .inc_by(0);
        }
        self.ambiguous.get_or_create(&label).inc_by(0);
        self.unacknowledged.get_or_create(&label).set(0);
        for kind in Alert::ALL {
            self.alerts
                .get_or_create(&AlertLabels {
                    scanner: name.to_string(),
                    kind: kind.as_str(),
                })
                .inc_by(0);
        }
    }

    /// A removed scanner's series (its feedback's stay).
    fn forget(&self, name: &str) {
        let label = label(name);
        self.scans_read.remove(&label);
        self.up.remove(&label);
        self.last_read.remove(&label);
        self.ambiguous.remove(&label);
        self.unacknowledged.remove(&label);
        for decision in ScanState::ALL {
            self.decisions.remove(&DecisionLabels {
                scanner: name.to_string(),
                decision: decision.as_str(),
            });
        }
        for kind in Alert::ALL {
            self.alerts.remove(&AlertLabels {
                scanner: name.to_string(),
                kind: kind.as_str(),
            });
        }
    }

    /// Change what scanner `s` says it is, its info series with it.
    fn said(&self, s: &mut LiveScanner, change: impl FnOnce(&mut LiveScanner)) {
        let before = InfoLabels::of(s);
        change(s);
        let after = InfoLabels::of(s);
        if before != after {
            if let Some(old) = &before {
                self.info.remove(old);
            }
            if let Some(new) = &after {
                self.info.get_or_create(new).set(1);
            }
        }
    }

    fn with(&self, name: &str, f: impl FnOnce(&mut LiveScanner)) {
        if let Some(s) = self.lock().get_mut(name) {
            s.roll_day();
            f(s);
        }
    }

    /// Scanners with their device open, and configured.
    pub(super) fn counts(&self) -> (usize, usize) {
        let live = self.lock();
        (live.values().filter(|s| s.connected).count(), live.len())
    }

    /// Every configured scanner as of now (today's counts rolled over).
    pub(super) fn live(&self) -> Vec<LiveScanner> {
        self.lock()
            .values()
            .cloned()
            .map(|mut s| {
                s.roll_day();
                s
            })
            .collect()
    }
}

impl Telemetry {
    /// The configured scanners changed (a reload): a new one starts
    /// disconnected with zero reads, a removed one's series are gone.
    pub fn set_scanners(&self, names: &[String]) {
        self.inner.scanners.set(names);
    }

    /// The alerts not yet acknowledged per scanner, as the database kept
    /// them (at start; those of a scanner no longer configured are not
    /// shown).
    pub fn unacknowledged_alerts(&self, open: &[(String, u64)]) {
        let m = &self.inner.scanners;
        for (name, n) in open {
            let mut configured = false;
            m.with(name, |s| {
                s.unacknowledged = *n;
                configured = true;
            });
            if configured {
                m.unacknowledged
                    .get_or_create(&label(name))
                    .set(i64::try_from(*n).unwrap_or(i64::MAX));
            }
        }
    }

    /// Scanner `name` opened `device`.
    /// Returns the identity the scanner had before, when `identity` is
    /// another physical device's.
    pub(crate) fn scanner_connected(
        &self,
        name: &str,
        device: &str,
        identity: Option<&crate::model::Identity>,
    ) -> Option<crate::model::Identity> {
        let m = &self.inner.scanners;
        m.up.get_or_create(&label(name)).set(1);
        let mut other = None;
        m.with(name, |s| {
            s.connected = true;
            s.device = Some(device.to_string());
            s.since_ms = Some(now_ms());
            if let Some(id) = identity {
                // (Before this run's first connect: what it was last run.)
                let last_run = m
                    .last_run
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .remove(name);
                m.said(s, |s| {
                    if let Some(old) = s.identity.replace(id.clone()).or(last_run) {
                        other = old.is_other_device(id).then_some(old);
                    }
                });
            }
        });
        other
    }

    /// Remember what each scanner was when the daemon last ran (`last`:
    /// the status file it left), so that another physical device under
    /// a name is told at its first connect of this run too.
    pub fn remember_last_run(&self, last: &super::live::LiveStatus) {
        let mut remembered = self
            .inner
            .scanners
            .last_run
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for s in &last.scanners {
            if let Some(id) = &s.identity {
                remembered.insert(s.name.clone(), id.clone());
            }
        }
    }

    /// Scanner `name` reported its software revision (Zebra SSI's
    /// `REPLY_REVISION`): its firmware in `status` and
    /// `scangate_scanner_info`.
    pub(crate) fn scanner_software(&self, name: &str, revision: &str) {
        let m = &self.inner.scanners;
        m.with(name, |s| {
            m.said(s, |s| s.software = Some(revision.to_string()));
        });
    }

    /// Scanner `name` went away (or stopped).
    pub(crate) fn scanner_disconnected(&self, name: &str) {
        let m = &self.inner.scanners;
        m.up.get_or_create(&label(name)).set(0);
        m.with(name, |s| {
            s.connected = false;
            s.since_ms = Some(now_ms());
        });
    }

    /// A signal to scanner `name` (`told`) was `outcome` (`sent`, `skipped`).
    pub(crate) fn feedback(&self, name: &str, told: &'static str, outcome: &'static str) {
        self.inner
            .scanners
            .feedback
            .get_or_create(&FeedbackLabels {
                scanner: name.to_string(),
                told,
                outcome,
            })
            .inc();
    }

    /// Scanner `name` read a scan (before it is durable).
    pub(crate) fn scan_read(&self, name: &str) {
        let m = &self.inner.scanners;
        let label = label(name);
        let now = now_ms();
        m.scans_read.get_or_create(&label).inc();
        m.last_read.get_or_create(&label).set(now as f64 / 1e3);
        m.with(name, |s| {
            s.last_read_ms = Some(now);
            s.reads_today += 1;
        });
    }

    /// Count one decision ([`crate::events::Decided`]), made at `now` on
    /// the boot clock; a final one's read → decision latency too.
    pub(crate) fn count_decision(&self, d: &Decision, now: i64) {
        let state = d.verdict.state();
        // A scan left unresolved again (a retry) is counted once.
        if state == ScanState::Pending
            || (state == ScanState::Unresolved && d.was == ScanState::Unresolved)
        {
            return;
        }
        let m = &self.inner.scanners;
        m.decisions
            .get_or_create(&DecisionLabels {
                scanner: d.scanner.clone(),
                decision: state.as_str(),
            })
            .inc();
        if state.is_final()
            && let Some(read) = d.read_boot_ns
        {
            self.inner.latency.decided(now - read);
        }
        if state == ScanState::Rejected {
            m.with(&d.scanner, |s| s.rejects_today += 1);
        }
        // Once per read: at its first decision (a read that waited was
        // counted then).
        if let Some(alert) = d.alert
            && matches!(state, ScanState::Committed | ScanState::Unresolved)
            && d.was != ScanState::Unresolved
        {
            m.alerts
                .get_or_create(&AlertLabels {
                    scanner: d.scanner.clone(),
                    kind: alert.as_str(),
                })
                .inc();
            let mut open = None;
            m.with(&d.scanner, |s| {
                s.alert(now_ms(), alert.as_str(), &d.scan_uuid);
                open = Some(s.unacknowledged);
            });
            if let Some(open) = open {
                m.unacknowledged
                    .get_or_create(&label(&d.scanner))
                    .set(i64::try_from(open).unwrap_or(i64::MAX));
            }
        }
        if d.acknowledged.is_some() {
            let mut configured = false;
            m.with(&d.scanner, |s| {
                s.unacknowledged = 0;
                s.acknowledged_ms = Some(now_ms());
                configured = true;
            });
            if configured {
                m.unacknowledged.get_or_create(&label(&d.scanner)).set(0);
            }
        }
        if d.ambiguous {
            m.ambiguous.get_or_create(&label(&d.scanner)).inc();
            // A burst is people at a counter now: not an outage's replay.
            let live = d
                .read_boot_ns
                .is_some_and(|read| now - read < AMBIGUOUS_LIVE_NS);
            m.with(&d.scanner, |s| s.ambiguous(now_ms(), live));
        }
    }
}
